// The fused GEMM+AllReduce's decode kernel (NOTE [fused decode] in fused_decode.h). The matmul
// is one warpgroup's wgmma on a ring of cp.async stages of 64 columns of K, fp32 accumulators.
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

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
};
template <>
struct CuteOf<__half> {
  using type = cute::half_t;
};

// One tile's layouts, copies and MMA. The tile is computed transposed, D^T = B A^T: the 64 rows of
// B are wgmma's M and the tile's kTileM rows of A its N, so that a 16-row tile wastes nothing.
// Both operands are K-major in 128-byte swizzled stages, filled by cp.async.
// Stages: 5, measured on one H200 (M x 8192 x 2048): three k-tiles load while one is multiplied
// and the wgmma of the one before finishes (compute_tile).
template <typename T, int kTileM, int kStages = 5>
struct DecodeTile {
  using E = typename CuteOf<T>::type;
  using TileM = cute::Int<kTileM>;
  using TileN = cute::Int<static_cast<int>(kDecodeTileN)>;
  using TileK = cute::Int<static_cast<int>(kDecodeTileK)>;
  using Stages = cute::Int<kStages>;
  using Atom = cute::GMMA::Layout_K_SW128_Atom<E>;  // 8 rows x 64 values
  using SmemA = decltype(cute::tile_to_shape(Atom{}, cute::make_shape(TileM{}, TileK{}, Stages{})));
  using SmemB = decltype(cute::tile_to_shape(Atom{}, cute::make_shape(TileN{}, TileK{}, Stages{})));
  // The tile of D, row-major [kTileM][64], seen as D^T (64 x kTileM) for the MMA's C.
  using SmemDt = cute::Layout<cute::Shape<TileN, TileM>, cute::Stride<cute::_1, TileN>>;
  // 16 rows x 8 threads of 16 bytes: 16 x 64 values per pass, K-major.
  using GmemCopy = decltype(cute::make_tiled_copy(
      cute::Copy_Atom<cute::SM80_CP_ASYNC_CACHEGLOBAL<cute::uint128_t>, E>{},
      cute::Layout<cute::Shape<cute::_16, cute::_8>, cute::Stride<cute::_8, cute::_1>>{},
      cute::Layout<cute::Shape<cute::_1, cute::_8>>{}));
  using Mma = decltype(cute::make_tiled_mma(
      cute::SM90::GMMA::ss_op_selector<E, E, float, cute::Shape<TileN, TileM, TileK>>()));
  static constexpr int kElems = cute::cosize_v<SmemA> + cute::cosize_v<SmemB> + kTileM * kDecodeTileN;
  static constexpr int kSmemBytes = kElems * 2 + 1024;  // + room to align the swizzled stages
};

// Tile (l, mt, nt) of alpha * A B, rounded to T, into sD ([kTileM][64], row-major); the block is
// synced on return.
template <typename T, int kTileM, int kStages, class SA, class SB, class SDt>
__device__ void compute_tile(const FusedDecodeArgs& args, int64_t l, int64_t mt, int64_t nt, SA& sA, SB& sB,
                             SDt& sDt) {
  using namespace cute;
  using Tl = DecodeTile<T, kTileM, kStages>;
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

  const int k_tiles = static_cast<int>(size<3>(tAgA));
  // Tiles of one tile row start at different k-tiles, so that the blocks do not all read the
  // same columns of A at once. Stage s holds k-tile (first + s) mod k_tiles.
  const int first = static_cast<int>(nt % k_tiles);
  const auto load = [&](int s) {  // the s-th k-tile of this tile into its stage; an empty group past the end
    if (s < k_tiles) {
      const int kt = first + s < k_tiles ? first + s : first + s - k_tiles;
      copy(gmem_copy, tAgA(_, _, _, kt), tAsA(_, _, _, s % kStages));
      copy(gmem_copy, tBgB(_, _, _, kt), tBsB(_, _, _, s % kStages));
    }
    cp_async_fence();
  };
  // One k-tile's wgmma stays in flight while the next is issued (M=16: 9.2 -> 8.2 us, M=128:
  // 15.5 -> 13.3 on one H200), so a stage is refilled one k-tile later than it could be.
  constexpr int kInFlight = 1;
  constexpr int kAhead = kStages - 1 - kInFlight;  // k-tiles loaded ahead of the one multiplied
  CUTE_UNROLL
  for (int s = 0; s < kAhead; ++s) load(s);

  // B is the MMA's A operand and A its B: the accumulators hold D^T.
  typename Tl::Mma mma;
  ThrMMA thr_mma = mma.get_thread_slice(threadIdx.x);
  Tensor tCrB = thr_mma.make_fragment_A(thr_mma.partition_A(sB));  // (MMA,MMA_M,MMA_K,PIPE) descriptors
  Tensor tCrA = thr_mma.make_fragment_B(thr_mma.partition_B(sA));  // (MMA,MMA_N,MMA_K,PIPE)
  Tensor acc = partition_fragment_C(mma, Shape<typename Tl::TileN, typename Tl::TileM>{});  // fp32
  clear(acc);

  CUTE_NO_UNROLL
  for (int s = 0; s < k_tiles; ++s) {
    cp_async_wait<kAhead - 1>();  // k-tile s has landed (for this thread's copies)
    cutlass::arch::fence_view_async_shared();  // ... and is visible to wgmma
    __syncthreads();  // for every thread's copies; and every warp is done with k-tile s - 1 - kInFlight
    load(s + kAhead);  // into that k-tile's stage
    warpgroup_fence_operand(acc);
    warpgroup_arrive();
    gemm(mma, tCrB(_, _, _, s % kStages), tCrA(_, _, _, s % kStages), acc);
    warpgroup_commit_batch();
    warpgroup_wait<kInFlight>();
    warpgroup_fence_operand(acc);
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);
  cp_async_wait<0>();
  Tensor tCsDt = thr_mma.partition_C(sDt);
  CUTE_UNROLL
  for (int i = 0; i < size(acc); ++i) tCsDt(i) = E(args.alpha * acc(i));
  __syncthreads();
}

template <typename T, int kW, int kTileM>
__global__ void __launch_bounds__(kFusedDecodeThreads)
    fused_decode_kernel(const __grid_constant__ FusedDecodeArgs args) {
  using Tl = DecodeTile<T, kTileM>;
  using E = typename Tl::E;
  const SymmCollectiveArgs& a = args.ar;
  // Staging half (e & 1) of every rank holds W partial slots and one slot of sums (two-shot).
  __shared__ uint4* slot_at_halves[2][32];  // my partial slot in every rank's half
  __shared__ uint4* slots_halves[2][32];    // every partial slot of my own half
  __shared__ uint4* sums_at_halves[2][32];  // the sums slot of every rank's half
  const int me = a.env.rank, world = kW > 0 ? kW : a.world;
  const int64_t vecs = a.count / 8, half_vecs = (world + 1) * vecs;
  // NOTE [one-load prologue]: both halves, from the parameters.
  fill_slot_tables(a, world, vecs, half_vecs, slot_at_halves, slots_halves);
  if (threadIdx.x < world)
    for (int h = 0; h < 2; ++h)
      sums_at_halves[h][threadIdx.x] = stage_half(a, threadIdx.x, h, half_vecs) + world * vecs;
  uint64_t e;
  if (!begin_call(a, e)) return;  // the whole block, or none of it
  uint4* const* slot_at = slot_at_halves[e & 1];
  uint4* const* slots = slots_halves[e & 1];
  uint4* const* sums_at = sums_at_halves[e & 1];

  extern __shared__ char smem_raw[];
  E* sa = reinterpret_cast<E*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
  E* sb = sa + cute::cosize_v<typename Tl::SmemA>;
  E* sd = sb + cute::cosize_v<typename Tl::SmemB>;
  auto sA = cute::make_tensor(cute::make_smem_ptr(sa), typename Tl::SmemA{});
  auto sB = cute::make_tensor(cute::make_smem_ptr(sb), typename Tl::SmemB{});
  auto sDt = cute::make_tensor(cute::make_smem_ptr(sd), typename Tl::SmemDt{});

  const int64_t m_tiles = args.m / kTileM, n_tiles = args.n / kDecodeTileN, tiles = args.l * m_tiles * n_tiles;
  const int64_t nv = args.n / 8;                         // 16-byte vectors per row of D
  constexpr int kTileVecs = kTileM * kDecodeTileN / 8;  // of a tile, 8 per row
  // Tile t's batch, tile row and tile column, and its first vector in D [L, M, N] (and in each
  // staging slot): its vector v is v / 8 rows and v % 8 vectors further (vec_of).
  struct TileAt {
    int64_t l, mt, nt, base;
  };
  const auto tile_at = [&](int64_t t) {
    const int64_t nt = t % n_tiles, mt = t / n_tiles % m_tiles, l = t / (n_tiles * m_tiles);
    return TileAt{l, mt, nt, (l * args.m + mt * kTileM) * nv + nt * (kDecodeTileN / 8)};
  };
  const auto vec_of = [&](int64_t base, int v) { return base + v / 8 * nv + v % 8; };
  // One-shot: every rank sums every tile. Two-shot: tile t's owner, rank t mod W, alone.
  const auto owner = [&](int64_t t) { return args.two_shot ? static_cast<int>(t % world) : me; };
  // Compute and push every tile of this block first (one-shot: to every rank; two-shot: to its
  // owner): a push never waits.
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TileAt tile = tile_at(t);
    compute_tile<T, kTileM, Tl::Stages::value>(args, tile.l, tile.mt, tile.nt, sA, sB, sDt);
    const int64_t base = tile.base;
    const int to = owner(t);
    for (int v = threadIdx.x; v < kTileVecs; v += kFusedDecodeThreads) {
      const uint4 x = never_empty(reinterpret_cast<const uint4*>(sd)[v]);  // row v / 8, 8 values per vector
      const int64_t g = vec_of(base, v);
      for (int q = 0; q < world; ++q)
        if ((q == to || !args.two_shot) && (q == me || !a.drop_sends)) slot_at[q][g] = x;
    }
    __syncthreads();  // sD is the next tile's
  }
  // Then sum the tiles this rank sums, W slots in rank order, as they fill; two-shot pushes each
  // rounded sum to every peer. These waits depend only on the pushes above.
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    if (owner(t) != me) continue;
    const int64_t base = tile_at(t).base;
    for (int v = threadIdx.x; v < kTileVecs; v += kFusedDecodeThreads) {
      const int64_t g = vec_of(base, v);
      float acc[1][8];
      if (!sum_slots<T, kW, 1>(slots, world, g, 1, g + 1, a.env, comm::WaitSite::kDecodeTile, acc)) return;
      const uint4 sum = pack8<T>(acc[0]);
      if (args.two_shot && !a.drop_sends)
        for (int q = 0; q < world; ++q)
          if (q != me) sums_at[q][g] = never_empty(sum);
      write_out<T>(a, g, sum);
    }
  }
  // Two-shot: the other tiles' sums, from their owners (these waits depend on the sums above).
  for (int64_t t = blockIdx.x; args.two_shot && t < tiles; t += gridDim.x) {
    const int from = owner(t);
    if (from == me) continue;
    const int64_t base = tile_at(t).base;
    for (int v = threadIdx.x; v < kTileVecs; v += kFusedDecodeThreads) {
      const int64_t g = vec_of(base, v);
      uint4* p = sums_at[me] + g;
      uint4 x = ld_volatile(p);
      if (!wait_filled(p, x, a.env, from, comm::WaitSite::kDecodeSum)) return;
      *p = uint4{};
      write_out<T>(a, g, x);
    }
  }
  end_call(a, e);
}

struct FusedDecodeKernel {
  int tile_m;
  template <typename T, int W>
  const void* operator()() const {
    switch (tile_m) {
      case 16: return reinterpret_cast<const void*>(fused_decode_kernel<T, W, 16>);
      case 32: return reinterpret_cast<const void*>(fused_decode_kernel<T, W, 32>);
      case 64: return reinterpret_cast<const void*>(fused_decode_kernel<T, W, 64>);
      default: return reinterpret_cast<const void*>(fused_decode_kernel<T, W, 128>);
    }
  }
};

}  // namespace

const void* fused_decode_fn(DType dtype, int world, int tile_m) {
  TPGEMM_ASSERT(tile_m == 16 || tile_m == 32 || tile_m == 64 || tile_m == 128);
  return kernel_instance(dtype, world, FusedDecodeKernel{tile_m});
}

// (The same for either 16-bit type.)
template <int kTileM>
constexpr int kDecodeSmemBytes = DecodeTile<__nv_bfloat16, kTileM>::kSmemBytes;
static_assert(DecodeTile<__half, 16>::kSmemBytes == kDecodeSmemBytes<16> &&
              DecodeTile<__half, 32>::kSmemBytes == kDecodeSmemBytes<32> &&
              DecodeTile<__half, 64>::kSmemBytes == kDecodeSmemBytes<64> &&
              DecodeTile<__half, 128>::kSmemBytes == kDecodeSmemBytes<128>);

int fused_decode_smem_bytes(int tile_m) {
  switch (tile_m) {
    case 16: return kDecodeSmemBytes<16>;
    case 32: return kDecodeSmemBytes<32>;
    case 64: return kDecodeSmemBytes<64>;
    default: return kDecodeSmemBytes<128>;
  }
}

}  // namespace tpgemm::ops
