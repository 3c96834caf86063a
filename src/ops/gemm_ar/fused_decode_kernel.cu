// The fused GEMM+AllReduce's decode kernel (NOTE [fused decode] in fused_decode.h). The matmul
// is CuTe's Ampere recipe (examples/cute/tutorial/sgemm_sm80.cu): a ring of cp.async stages of
// 64 columns of K, swizzled for ldmatrix, feeding mma.sync with fp32 accumulators.
#include <cute/tensor.hpp>

#include "core/check.h"
#include "ops/allreduce/allreduce_device.cuh"
#include "ops/gemm_ar/fused_decode.h"

namespace tpgemm::ops {
namespace {

template <typename T>
struct CuteOf;
template <>
struct CuteOf<__nv_bfloat16> {
  using type = cute::bfloat16_t;
  using Mma = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct CuteOf<__half> {
  using type = cute::half_t;
  using Mma = cute::SM80_16x8x16_F32F16F16F32_TN;
};

// One tile's layouts, copies and MMA. 16-row tiles: four warps side by side along N; 128-row
// tiles: 2 x 2 warps, each 32 x 32 per step.
template <typename T, int kTileM>
struct DecodeTile {
  using E = typename CuteOf<T>::type;
  using TileM = cute::Int<kTileM>;
  using TileN = cute::Int<static_cast<int>(kDecodeTileN)>;
  using TileK = cute::Int<static_cast<int>(kDecodeTileK)>;
  using Stages = cute::Int<kTileM == 128 ? 3 : 4>;
  // 8 rows x 64 columns of 16-bit values, swizzled so that ldmatrix reads without bank conflicts.
  using SwizzleAtom = decltype(cute::composition(
      cute::Swizzle<3, 3, 3>{},
      cute::Layout<cute::Shape<cute::_8, cute::Shape<cute::_8, cute::_8>>, cute::Stride<cute::_8, cute::Stride<cute::_1, cute::_64>>>{}));
  using SmemA = decltype(cute::tile_to_shape(SwizzleAtom{}, cute::make_shape(TileM{}, TileK{}, Stages{})));
  using SmemB = decltype(cute::tile_to_shape(SwizzleAtom{}, cute::make_shape(TileN{}, TileK{}, Stages{})));
  using SmemD = cute::Layout<cute::Shape<TileM, TileN>, cute::Stride<TileN, cute::_1>>;  // row-major
  // 128 threads, 16 rows x 8 threads of 16 bytes: 16 x 64 values per pass, K-major.
  using GmemCopy = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, E>{},
      cute::Layout<cute::Shape<cute::_16, cute::_8>, cute::Stride<cute::_8, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
  using SmemRead = cute::Copy_Atom<cute::SM75_U32x4_LDSM_N, E>;
  static auto make_mma() {
    using Atom = typename CuteOf<T>::Mma;
    if constexpr (kTileM == 16)
      return cute::make_tiled_mma(Atom{}, cute::Layout<cute::Shape<cute::_1, cute::_4, cute::_1>>{},
                                  cute::Tile<cute::_16, cute::_64, cute::_16>{});
    else
      return cute::make_tiled_mma(Atom{}, cute::Layout<cute::Shape<cute::_2, cute::_2, cute::_1>>{},
                                  cute::Tile<cute::_32, cute::_32, cute::_16>{});
  }
  using Mma = decltype(make_mma());
  static constexpr int kElems = cute::cosize_v<SmemA> + cute::cosize_v<SmemB> + cute::cosize_v<SmemD>;
  static constexpr int kSmemBytes = kElems * 2 + 1024;  // + room to align the swizzled stages
};

// Tile (l, mt, nt) of alpha * A B, rounded to T, into sD; the block is synced on return.
template <typename T, int kTileM, class SA, class SB, class SD>
__device__ void compute_tile(const FusedDecodeArgs& args, int64_t l, int64_t mt, int64_t nt, SA& sA, SB& sB, SD& sD) {
  using namespace cute;
  using Tl = DecodeTile<T, kTileM>;
  using E = typename Tl::E;
  const E* a_ptr = static_cast<const E*>(args.a) + l * args.m * args.k;
  const E* b_ptr = static_cast<const E*>(args.b) + l * args.n * args.k;
  Tensor mA = make_tensor(make_gmem_ptr(a_ptr), make_shape(args.m, args.k), make_stride(args.k, Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(b_ptr), make_shape(args.n, args.k), make_stride(args.k, Int<1>{}));
  Tensor gA = local_tile(mA, make_shape(typename Tl::TileM{}, typename Tl::TileK{}), make_coord(mt, _));  // (BM,BK,k)
  Tensor gB = local_tile(mB, make_shape(typename Tl::TileN{}, typename Tl::TileK{}), make_coord(nt, _));  // (BN,BK,k)

  typename Tl::GmemCopy gmem_copy;
  ThrCopy thr_copy = gmem_copy.get_slice(threadIdx.x);
  Tensor tAgA = thr_copy.partition_S(gA);  // (CPY,CPY_M,CPY_K,k)
  Tensor tAsA = thr_copy.partition_D(sA);  // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tBgB = thr_copy.partition_S(gB);
  Tensor tBsB = thr_copy.partition_D(sB);

  constexpr int kPipe = size<3>(decltype(tAsA){});
  const int k_tiles = static_cast<int>(size<3>(tAgA));
  int k_tile_count = k_tiles;
  // Tiles of one tile row start at different k-tiles, so that the blocks do not all read the
  // same columns of A at once.
  int k_tile_next = static_cast<int>(nt % k_tiles);
  const auto advance = [&] {
    if (--k_tile_count > 0) k_tile_next = k_tile_next + 1 == k_tiles ? 0 : k_tile_next + 1;
  };
  CUTE_UNROLL
  for (int p = 0; p < kPipe - 1; ++p) {
    copy(gmem_copy, tAgA(_, _, _, k_tile_next), tAsA(_, _, _, p));
    copy(gmem_copy, tBgB(_, _, _, k_tile_next), tBsB(_, _, _, p));
    cp_async_fence();
    advance();
  }

  typename Tl::Mma mma;
  ThrMMA thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCsD = thr_mma.partition_C(sD);                         // (MMA,MMA_M,MMA_N)
  Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));       // (MMA,MMA_M,MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));       // (MMA,MMA_N,MMA_K)
  Tensor acc = partition_fragment_C(mma, Shape<typename Tl::TileM, typename Tl::TileN>{});  // fp32
  clear(acc);

  TiledCopy s2r_a = make_tiled_copy_A(typename Tl::SmemRead{}, mma);
  ThrCopy s2r_thr_a = s2r_a.get_slice(threadIdx.x);
  Tensor tXsA = s2r_thr_a.partition_S(sA);  // (CPY,MMA_M,MMA_K,PIPE)
  Tensor tXrA = s2r_thr_a.retile_D(tCrA);
  TiledCopy s2r_b = make_tiled_copy_B(typename Tl::SmemRead{}, mma);
  ThrCopy s2r_thr_b = s2r_b.get_slice(threadIdx.x);
  Tensor tXsB = s2r_thr_b.partition_S(sB);
  Tensor tXrB = s2r_thr_b.retile_D(tCrB);

  int pipe_read = 0, pipe_write = kPipe - 1;
  Tensor tXsA_p = tXsA(_, _, _, pipe_read);
  Tensor tXsB_p = tXsB(_, _, _, pipe_read);
  constexpr int kBlocks = size<2>(decltype(tCrA){});
  cp_async_wait<kPipe - 2>();
  __syncthreads();
  copy(s2r_a, tXsA_p(_, _, Int<0>{}), tXrA(_, _, Int<0>{}));
  copy(s2r_b, tXsB_p(_, _, Int<0>{}), tXrB(_, _, Int<0>{}));

  // Stage pipe_read is in registers block by block while stage pipe_write fills from global.
  CUTE_NO_UNROLL
  while (k_tile_count > -(kPipe - 1)) {
    CUTE_UNROLL
    for (int kb = 0; kb < kBlocks; ++kb) {
      if (kb == kBlocks - 1) {
        tXsA_p = tXsA(_, _, _, pipe_read);
        tXsB_p = tXsB(_, _, _, pipe_read);
        cp_async_wait<kPipe - 2>();
        __syncthreads();
      }
      const int kb_next = (kb + 1) % kBlocks;
      copy(s2r_a, tXsA_p(_, _, kb_next), tXrA(_, _, kb_next));
      copy(s2r_b, tXsB_p(_, _, kb_next), tXrB(_, _, kb_next));
      if (kb == 0) {
        copy(gmem_copy, tAgA(_, _, _, k_tile_next), tAsA(_, _, _, pipe_write));
        copy(gmem_copy, tBgB(_, _, _, k_tile_next), tBsB(_, _, _, pipe_write));
        cp_async_fence();
        advance();
        pipe_write = pipe_read;
        pipe_read = pipe_read == kPipe - 1 ? 0 : pipe_read + 1;
      }
      gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), acc);
    }
  }
  // The ring's last (repeated) loads land before the next tile reuses it.
  cp_async_wait<0>();
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) tCsD(i) = E(args.alpha * acc(i));
  __syncthreads();
}

template <typename T, int kW, int kTileM>
__global__ void __launch_bounds__(kFusedDecodeThreads) fused_decode_kernel(FusedDecodeArgs args) {
  using Tl = DecodeTile<T, kTileM>;
  using E = typename Tl::E;
  const SymmCollectiveArgs& a = args.ar;
  __shared__ uint4* slot_at[32];  // my slot in every rank's staging half
  __shared__ uint4* slots[32];    // every slot of my own staging half
  if (__syncthreads_or(comm::tripped(a.env))) return;  // the whole block, or none of it
  const uint64_t e = begin_call(a);
  const int me = a.env.rank, world = kW > 0 ? kW : a.world;
  fill_slot_tables(a, world, e, a.count / 8, slot_at, slots);

  extern __shared__ char smem_raw[];
  E* sa = reinterpret_cast<E*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
  E* sb = sa + cute::cosize_v<typename Tl::SmemA>;
  E* sd = sb + cute::cosize_v<typename Tl::SmemB>;
  auto sA = cute::make_tensor(cute::make_smem_ptr(sa), typename Tl::SmemA{});
  auto sB = cute::make_tensor(cute::make_smem_ptr(sb), typename Tl::SmemB{});
  auto sD = cute::make_tensor(cute::make_smem_ptr(sd), typename Tl::SmemD{});

  const int64_t m_tiles = args.m / kTileM, n_tiles = args.n / kDecodeTileN, tiles = args.l * m_tiles * n_tiles;
  const int64_t nv = args.n / 8;                         // 16-byte vectors per row of D
  constexpr int kTileVecs = kTileM * kDecodeTileN / 8;  // of a tile, 8 per row
  // Tile t's batch, tile row and tile column, and its first vector in D [L, M, N] (and in each
  // staging slot): its vector v is v / 8 rows and v % 8 vectors further.
  struct TileAt {
    int64_t l, mt, nt, base;
  };
  const auto tile_at = [&](int64_t t) {
    const int64_t nt = t % n_tiles, mt = t / n_tiles % m_tiles, l = t / (n_tiles * m_tiles);
    return TileAt{l, mt, nt, (l * args.m + mt * kTileM) * nv + nt * (kDecodeTileN / 8)};
  };
  // Compute and push every tile of this block first: a push never waits.
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TileAt tile = tile_at(t);
    compute_tile<T, kTileM>(args, tile.l, tile.mt, tile.nt, sA, sB, sD);
    const int64_t base = tile.base;
    for (int v = threadIdx.x; v < kTileVecs; v += kFusedDecodeThreads) {
      const uint4 x = never_empty(reinterpret_cast<const uint4*>(sd)[v]);  // row v / 8, 8 values per vector
      const int64_t g = base + v / 8 * nv + v % 8;
      for (int q = 0; q < world; ++q)
        if (q == me || !a.drop_sends) slot_at[q][g] = x;
    }
    __syncthreads();  // sD is the next tile's
  }
  // Then sum them, W slots in rank order, as they fill.
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t base = tile_at(t).base;
    for (int v = threadIdx.x; v < kTileVecs; v += kFusedDecodeThreads) {
      const int64_t g = base + v / 8 * nv + v % 8;
      float acc[1][8];
      if (!sum_slots<T, kW, 1>(slots, world, g, 1, g + 1, a.env, comm::WaitSite::kDecodeTile, acc)) return;
      write_out<T>(a, g, pack8<T>(acc[0]));
    }
  }
  end_call(a, e);
}

struct FusedDecodeKernel {
  int tile_m;
  template <typename T, int W>
  const void* operator()() const {
    return tile_m == 128 ? reinterpret_cast<const void*>(fused_decode_kernel<T, W, 128>)
                         : reinterpret_cast<const void*>(fused_decode_kernel<T, W, 16>);
  }
};

}  // namespace

const void* fused_decode_fn(DType dtype, int world, int tile_m) {
  TPGEMM_ASSERT(tile_m == 16 || tile_m == 128);
  return kernel_instance(dtype, world, FusedDecodeKernel{tile_m});
}

// (The same for either 16-bit type.)
static_assert(DecodeTile<__half, 16>::kSmemBytes == DecodeTile<__nv_bfloat16, 16>::kSmemBytes &&
              DecodeTile<__half, 128>::kSmemBytes == DecodeTile<__nv_bfloat16, 128>::kSmemBytes);

int fused_decode_smem_bytes(int tile_m) {
  return tile_m == 128 ? DecodeTile<__nv_bfloat16, 128>::kSmemBytes : DecodeTile<__nv_bfloat16, 16>::kSmemBytes;
}

}  // namespace tpgemm::ops
