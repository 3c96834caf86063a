// The fused GEMM+ReduceScatter's and GEMM+AllReduce's push-and-reduce kernel (NOTE [tile reduce]
// and NOTE [tile all-reduce] in tile_reduce.h).
#include "comm/device/sync.cuh"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "ops/allreduce/allreduce_device.cuh"  // kernel_instance, NOTE [empty lanes]
#include "ops/common/vec.cuh"
#include "ops/gemm_rs/tile_reduce.h"

namespace tpgemm::ops {
namespace {

constexpr int kThreads = 512;
// Vectors per thread in flight from each rank, as registers allow without spilling (W = 0: any
// other world size, one rank's vector at a time; the all-reduce's pushes of the sums take half).
template <int kW, bool kAllReduce>
constexpr int kReduceUnroll = kW == 2 ? (kAllReduce ? 2 : 4) : kW == 4 ? (kAllReduce ? 1 : 2) : 1;

// Runs alone on the caller's stream between calls (no block of either call runs beside it).
__global__ void begin_call_kernel(uint64_t* control) {
  control[0] += 1;
  control[1] = 0;
}

// A group's rows [128 rows from row0] and vector columns [c0, c0 + nv_span) of a [rows, nv] matrix.
struct Span {
  int64_t nv_span;
  __device__ int64_t at(int64_t v, int64_t nv) const { return v / nv_span * nv + v % nv_span; }
};

// A gather unit of the all-reduce (NOTE [tile all-reduce]): stores owner o's sums of one group
// (vector `at` of the group at from[at]) into D at d + at, plus this rank's beta * C, as they
// land, emptying each vector once read. False (reported) if a wait ran out; every thread of the
// block returns the same.
template <typename T>
__device__ bool gather_group(const TileReduceArgs& a, uint4* from, int64_t d_at, Span span, int64_t count, int64_t nv,
                             int o) {
  constexpr int kU = 4;
  bool failed = false;
  for (int64_t v0 = threadIdx.x; v0 < count && !failed; v0 += kThreads * kU) {
    uint4 x[kU];
#pragma unroll
    for (int i = 0; i < kU; ++i)
      if (v0 + i * kThreads < count) x[i] = ld_volatile(from + span.at(v0 + i * kThreads, nv));
#pragma unroll
    for (int i = 0; i < kU; ++i) {
      if (v0 + i * kThreads >= count || failed) continue;
      const int64_t at = span.at(v0 + i * kThreads, nv);
      if (!wait_filled(from + at, x[i], a.env, o, comm::WaitSite::kTileGather)) {
        failed = true;
        continue;
      }
      from[at] = uint4{};
      store_sum<T>(static_cast<uint4*>(a.d), a.c, a.beta, d_at + at, x[i]);
    }
  }
  return !__syncthreads_or(failed);
}

// kAllReduce: a.gather is set (NOTE [tile all-reduce]); its own instance, so that the
// reduce-scatter's registers stay as they were.
template <typename T, int kW, bool kAllReduce>
__global__ void __launch_bounds__(kThreads) tile_reduce_kernel(TileReduceArgs a) {
  __shared__ int64_t unit;
  const int world = kW > 0 ? kW : a.world, me = a.rank;
  const uint64_t seq = *reinterpret_cast<volatile uint64_t*>(a.control);
  const int64_t tiles_per_rank = a.m / world / kTileReduceM;                   // gemm_rs: M/W rows each
  const int64_t groups = (a.n_tiles + a.group_tiles - 1) / a.group_tiles;       // of a tile row
  const int64_t units = a.l * a.m_tiles * groups;                               // reductions and pushes
  const int64_t tickets = kAllReduce ? 2 * units : units;                       // then as many gathers
  const int64_t nv = a.n / 8;                                                   // 16-byte vectors per row
  const int64_t slot = a.l * a.slot_rows * nv;                                  // vectors per receive slot
  const int64_t half = static_cast<int64_t>(seq & 1) * world * slot;            // NOTE [two staging halves]
  const uint4* p = static_cast<const uint4*>(a.partial);
  for (;;) {
    if (threadIdx.x == 0)
      unit = static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(a.control + 1), 1ull));
    __syncthreads();
    const int64_t ticket = unit;
    __syncthreads();  // everyone has read `unit` before thread 0 takes the next ticket
    if (ticket >= tickets) return;
    // Group g of tile row s of the GEMM's order (NOTE [tile order]): row j of owner o. gemm_rs:
    // tile row j of o's block of M/W rows; gemm_ar: tile row s itself (NOTE [tile all-reduce]),
    // the last one cut at M.
    const bool gathering = kAllReduce && ticket >= units;
    const int64_t u = gathering ? ticket - units : ticket;
    const int64_t g = u % groups, s = u / groups % a.m_tiles, l = u / (groups * a.m_tiles);
    const int o = static_cast<int>(s % world);
    const int64_t j = s / world, m_tile = kAllReduce ? s : o * tiles_per_rank + j;
    const int64_t t0 = g * a.group_tiles, t1 = min(t0 + a.group_tiles, a.n_tiles);
    const int64_t c0 = t0 * (kTileReduceN / 8);
    const Span span{min(t1 * (kTileReduceN / 8), nv) - c0};
    const int64_t count = min(kTileReduceM, a.m - m_tile * kTileReduceM) * span.nv_span;
    // The group in P (row m_tile * 128 of batch l) and in owner o's slot rows (its j-th tile row;
    // gemm_rs's D [L, M/W, N] has the same rows).
    const int64_t in_p = (l * a.m + m_tile * kTileReduceM) * nv + c0;
    const int64_t in_block = (l * a.slot_rows + j * kTileReduceM) * nv + c0;
    if (gathering) {          // the all-reduce's second half: owner o's sums of the group, into D
      if (o == me) continue;  // stored by the reduction
      uint4* from = static_cast<uint4*>(a.gather[me]) + in_p;
      if (!gather_group<T>(a, from, in_p, span, count, nv, o)) return;  // reported
      continue;
    }
    // Its tiles from this GPU's GEMM: one lane of warp 0 per tile flag.
    bool ok = true;
    if (threadIdx.x < t1 - t0)
      ok = comm::wait_geq(a.tile_flags + (l * a.m_tiles + m_tile) * a.n_tiles + t0 + threadIdx.x, seq, a.env, me,
                          comm::WaitSite::kTileFlag, static_cast<int>(u));
    if (__syncthreads_or(!ok)) return;  // reported; the call fails on the host

    if (o != me) {  // push into slot `me` of owner o; the data is its own flag (NOTE [empty lanes])
      if (a.drop_pushes) continue;
      uint4* dst = static_cast<uint4*>(a.recv[o]) + half + me * slot + in_block;
      constexpr int kU = 4;
      for (int64_t v0 = threadIdx.x; v0 < count; v0 += kThreads * kU) {
        uint4 x[kU];
#pragma unroll
        for (int i = 0; i < kU; ++i)
          if (v0 + i * kThreads < count) x[i] = __ldcg(p + in_p + span.at(v0 + i * kThreads, nv));
#pragma unroll
        for (int i = 0; i < kU; ++i)
          if (v0 + i * kThreads < count) dst[span.at(v0 + i * kThreads, nv)] = never_empty(x[i]);
      }
      continue;
    }
    // Reduce: P's own group and the W - 1 received, in rank order (reproducible), each received
    // vector waited for as it fills and emptied once read.
    uint4* recv = static_cast<uint4*>(a.recv[me]) + half + in_block;
    constexpr int kU = kReduceUnroll<kW, kAllReduce>;
    bool failed = false;  // a wait ran out (reported): the whole block leaves together, below
    for (int64_t v0 = threadIdx.x; v0 < count && !failed; v0 += kThreads * kU) {
      float acc[kU][8] = {};
      uint4 x[kU][kW > 0 ? kW : 1];
      if constexpr (kW > 0) {
#pragma unroll
        for (int i = 0; i < kU; ++i)
#pragma unroll
          for (int q = 0; q < kW; ++q)
            if (v0 + i * kThreads < count) {
              const int64_t at = span.at(v0 + i * kThreads, nv);
              x[i][q] = q == me ? __ldcg(p + in_p + at) : ld_volatile(recv + q * slot + at);
            }
      }
#pragma unroll
      for (int i = 0; i < kU; ++i) {
        const int64_t v = v0 + i * kThreads;
        if (v >= count || failed) continue;
        const int64_t at = span.at(v, nv);
        for (int q = 0; q < world; ++q) {
          uint4 y;
          if constexpr (kW > 0) y = x[i][q];
          else y = q == me ? __ldcg(p + in_p + at) : ld_volatile(recv + q * slot + at);
          if (q != me) {
            if (!wait_filled(recv + q * slot + at, y, a.env, q, comm::WaitSite::kTilePush)) {
              failed = true;
              break;
            }
            recv[q * slot + at] = uint4{};
          }
          add_raw8<T>(y, acc[i]);
        }
        if (failed) continue;
        if constexpr (kAllReduce) {
          // The rounded sum to every peer, and here as there, each rank adds its own beta * C.
          const int64_t out = in_p + at;  // D [L, M, N]
          const uint4 sum = pack8<T>(acc[i]), sent = never_empty(sum);
          for (int q = 0; q < world; ++q)
            if (q != me) static_cast<uint4*>(a.gather[q])[out] = sent;
          store_sum<T>(static_cast<uint4*>(a.d), a.c, a.beta, out, sum);
          continue;
        }
        const int64_t out = in_block + at;  // D [L, M/W, N]
        if (a.c != nullptr) {
          float cv[8];
          widen8<T>(static_cast<const uint4*>(a.c)[out], cv);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[i][e] += a.beta * cv[e];
        }
        static_cast<uint4*>(a.d)[out] = pack8<T>(acc[i]);
      }
    }
    if (__syncthreads_or(failed)) return;  // the loop's barriers need every thread of the block
  }
}

struct TileReduceKernel {
  bool all_reduce;
  template <typename T, int W>
  const void* operator()() const {
    return all_reduce ? reinterpret_cast<const void*>(tile_reduce_kernel<T, W, true>)
                      : reinterpret_cast<const void*>(tile_reduce_kernel<T, W, false>);
  }
};

}  // namespace

void preload_tile_reduce(DType dtype, int world, bool all_reduce) {
  load_kernel_now(begin_call_kernel);
  cudaFuncAttributes attributes{};
  TPGEMM_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel_instance(dtype, world, TileReduceKernel{all_reduce})));
}

void launch_begin_call(uint64_t* control, cudaStream_t stream) {
  begin_call_kernel<<<1, 1, 0, stream>>>(control);
  TPGEMM_CUDA_CHECK(cudaGetLastError());
}

void launch_tile_reduce(const TileReduceArgs& args, DType dtype, int blocks, cudaStream_t stream) {
  const bool all_reduce = args.gather != nullptr;
  TPGEMM_ASSERT(args.world >= 1 && args.world <= 32 && args.n % 8 == 0 && args.m >= 1 &&
                (all_reduce || args.m % (args.world * kTileReduceM) == 0) &&
                args.m_tiles == (args.m + kTileReduceM - 1) / kTileReduceM &&
                args.slot_rows == tile_reduce_slot_rows(all_reduce, args.m, args.world) &&
                args.n_tiles == (args.n + kTileReduceN - 1) / kTileReduceN && args.group_tiles >= 1 &&
                args.group_tiles <= kTileReduceGroup);  // a flag per lane of warp 0
  TileReduceArgs a = args;
  void* params[] = {&a};
  // In clusters of 2 where the count allows: then its blocks take whole pairs of SMs, and a
  // persistent GEMM in clusters of 2 beside it still finds every pair it counted on free.
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = 2;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  if (blocks % 2 == 0) cfg.attrs = &cluster, cfg.numAttrs = 1;
  const void* kernel = kernel_instance(dtype, args.world, TileReduceKernel{all_reduce});
  TPGEMM_CUDA_CHECK(cudaLaunchKernelExC(&cfg, kernel, params));
}

}  // namespace tpgemm::ops
