// The fused AllGather+GEMM's gather by SMs (NOTE [sm pull] in sm_pull.h).
#include <algorithm>

#include "comm/device/sync.cuh"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/sm90/kernels.h"
#include "ops/ag_gemm/sm_pull.h"

namespace tpgemm::ops {
namespace {

constexpr int kThreads = 512;  // one block per SM, with the registers for 16 loads in flight each
constexpr int kInFlight = 16;  // 16-byte vectors per thread: an NVLink read is latency-bound
constexpr int64_t kUnitBytes = int64_t(256) << 10;

// Runs alone on the caller's stream between calls (no block of either call runs beside it).
__global__ void begin_kernel(uint64_t* control, int pieces, int slices) {
  const uint64_t e = control[0] + 1;
  control[0] = e;
  control[1] = 0;
  for (int j = 0; j < pieces; ++j) control[2 + j] = e * static_cast<uint64_t>(slices);
}

__device__ __forceinline__ void add_release_sys(void* word) {
  __threadfence_system();  // the block's stores (ordered before by the caller's __syncthreads)
  atomicAdd_system(static_cast<unsigned long long*>(word), 1ull);
}

// Copies slice `slice` of the block's [L x rows_per_rank] rows, K columns [c0, c1), from `src`
// (rows src_row0 onwards of a [L][src_rows][K] matrix) into my G at the same global rows as
// block `owner`'s. Block-wide. The threads form a grid of rows by `tc` vector columns, tc the
// half-row (at least a warp, at most the block), so that each thread has kInFlight loads in
// flight (kInFlight / 2 rows by 2 columns) whatever the shape of the slice, and computes each
// row's address once: a slice of 16 rows left 4 loads in flight per thread, and 64-bit
// divisions per vector made the kernel several times slower than the copy engines.
__device__ void copy_unit(const SmPullArgs& a, const uint4* src, int64_t src_rows, int64_t src_row0, int owner,
                          int slice, int64_t c0, int64_t c1) {
  constexpr int kRows = kInFlight / 2;
  const int64_t rows = a.l * a.rows_per_rank;
  const int64_t r0 = rows * slice / a.slices, r1 = rows * (slice + 1) / a.slices;
  const int vpr = static_cast<int>((c1 - c0) * a.elem_bytes / 16);
  const int tc = min(kThreads, max(32, (vpr / 2 + 31) / 32 * 32)), row_step = kThreads / tc;
  const int tcol = threadIdx.x % tc, trow = threadIdx.x / tc;  // threads past row_step * tc idle
  if (trow >= row_step) return;
  const int64_t row_vecs = a.k * a.elem_bytes / 16, v0 = c0 * a.elem_bytes / 16;
  uint4* g = static_cast<uint4*>(a.g[a.rank]);
  const auto first = [&](int64_t r, int64_t total_rows, int64_t row0) {  // row r's vector v0
    const int64_t l = a.l == 1 ? 0 : r / a.rows_per_rank, row = a.l == 1 ? r : r % a.rows_per_rank;
    return (l * total_rows + row0 + row) * row_vecs + v0;
  };
  for (int j0 = tcol; j0 < vpr; j0 += 2 * tc)
    for (int64_t rb = r0 + trow; rb < r1; rb += int64_t(row_step) * kRows) {
      uint4 x[kRows][2];
#pragma unroll
      for (int q = 0; q < kRows; ++q) {
        const int64_t r = rb + int64_t(q) * row_step;
        if (r >= r1) continue;
        const uint4* from = src + first(r, src_rows, src_row0);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (j0 + h * tc < vpr) x[q][h] = from[j0 + h * tc];
      }
#pragma unroll
      for (int q = 0; q < kRows; ++q) {
        const int64_t r = rb + int64_t(q) * row_step;
        if (r >= r1) continue;
        uint4* to = g + first(r, a.m, owner * a.rows_per_rank);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if (j0 + h * tc < vpr) to[j0 + h * tc] = x[q][h];
      }
    }
}

__global__ void __launch_bounds__(kThreads, 1) sm_pull_kernel(SmPullArgs a) {
  __shared__ int64_t ticket;
  __shared__ int ok;
  if (__syncthreads_or(comm::tripped(a.env))) return;  // the whole block, or none of it
  const int W = a.world, P = a.pieces, S = a.slices, me = a.rank;
  const uint64_t e = a.control[0];
  uint64_t* pad = static_cast<uint64_t*>(a.pads[me]);
  const int64_t per_piece = int64_t(W) * S, k_tiles = gemm::sm90::chunk_wait_k_tiles(a.k);
  for (;;) {
    if (threadIdx.x == 0) ticket = static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(a.control + 1), 1ull));
    __syncthreads();
    const int64_t t = ticket;
    if (t >= P * per_piece) return;  // every thread alike
    const int j = static_cast<int>(t / per_piece), s = static_cast<int>(t % per_piece / S), slice = static_cast<int>(t % S);
    const int src = (me + s) % W;
    if (threadIdx.x == 0) {
      bool fine = true;
      if (s == 0) {  // my rows of the previous call: every peer has pulled all of them
        for (int q = 0; q < W && fine; ++q)
          if (q != me)
            fine = comm::wait_geq(pad + sm_pull_done(W, P) + q, (e - 1) * P * S, a.env, q, comm::WaitSite::kGatherDone, j);
      } else {  // this piece of the peer's own rows is in its G
        const uint64_t* published = static_cast<const uint64_t*>(a.pads[src]) + sm_pull_published(W, P) + j;
        fine = comm::wait_geq(published, e * S, a.env, src, comm::WaitSite::kGatherPublished, j);
      }
      ok = fine;
    }
    __syncthreads();  // also: every thread has read `ticket`
    if (!ok) return;  // every thread alike
    const int64_t c0 = gemm::sm90::gather_k_piece_begin(j, k_tiles, P) * gemm::sm90::kChunkWaitTileK;
    const int64_t c1 = min(gemm::sm90::gather_k_piece_begin(j + 1, k_tiles, P) * gemm::sm90::kChunkWaitTileK, a.k);
    if (s == 0)
      copy_unit(a, static_cast<const uint4*>(a.a), a.rows_per_rank, 0, me, slice, c0, c1);
    else
      copy_unit(a, static_cast<const uint4*>(a.g[src]), a.m, src * a.rows_per_rank, src, slice, c0, c1);
    __syncthreads();  // every thread's stores before the release below; `ok` read by all
    if (threadIdx.x == 0) {
      if (s == 0 && !a.drop_publish) add_release_sys(pad + sm_pull_published(W, P) + j);
      // My loads of the peer's G have returned (their values are stored): it may overwrite it.
      if (s > 0) add_release_sys(static_cast<uint64_t*>(a.pads[src]) + sm_pull_done(W, P) + me);
      add_release_sys(pad + int64_t(s) * P + j);
    }
  }
}

}  // namespace

int sm_pull_slices(int64_t rows_per_rank, int64_t l, int64_t k, int pieces, int64_t elem_bytes) {
  const int64_t piece_bytes = l * rows_per_rank * k * elem_bytes / pieces;
  return static_cast<int>(std::clamp<int64_t>((piece_bytes + kUnitBytes - 1) / kUnitBytes, 1, l * rows_per_rank));
}

void preload_sm_pull() {
  load_kernel_now(begin_kernel);
  load_kernel_now(sm_pull_kernel);
}

void launch_sm_pull_begin(uint64_t* control, int pieces, int slices, cudaStream_t stream) {
  begin_kernel<<<1, 1, 0, stream>>>(control, pieces, slices);
  TPGEMM_CHECK_LAUNCH();
}

void launch_sm_pull(const SmPullArgs& args, int blocks, cudaStream_t stream) {
  // In clusters of two, as the GEMM's: the block scheduler spreads a kernel's blocks over SMs, and
  // lone blocks on four SMs of four GPCs measured to leave the GEMM two clusters short, which
  // then ran a second wave (W=2, 512 x 8192 x 8192: 0.28-0.30 ms against 0.14 with copy engines).
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute cluster{};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = kSmPullCluster;
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cfg.attrs = &cluster;
  cfg.numAttrs = 1;
  TPGEMM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, sm_pull_kernel, args));
}

}  // namespace tpgemm::ops
