// The ladder's second rung (NOTE [ladder protocol]): the study's threadloadGatherScalarCompute.
// One persistent kernel, every block co-resident (a cooperative launch guarantees it):
//   phase 1  each block gathers chunks of peers' rows into G with thread loads over NVLink
//            (ladder_gather_chunk), then marks the chunk gathered: a device semaphore in this
//            GPU's memory (not shared with peers) carrying this call's sequence number, so it
//            never needs a reset;
//   phase 2  each block computes 64 x 64 tiles of D with plain fp32 FMAs from shared memory (no
//            tensor cores), waiting, bounded, on the semaphore of the tile's chunk.
// Both phases start at this rank's own rows, which need no gathering. A block waits in phase 2
// only on chunks that phase 1 assigned to some block, and every block finishes phase 1 before
// it waits: with all blocks resident, no wait can depend on a block that is not running.
#include <algorithm>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "ops/ag_gemm/ladder.cuh"
#include "ops/common/vec.cuh"

namespace tpgemm::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kTileN = 64, kTileK = 16;
constexpr int kTileM = static_cast<int>(kLadderChunkRows);  // one tile row = one chunk

__device__ __forceinline__ bool chunk_has_peer_rows(const LadderArgs& a, int64_t chunk) {
  const int64_t r0 = chunk * kLadderChunkRows, r1 = min(r0 + kLadderChunkRows, a.m);
  return !(r0 >= a.rank * a.rows_per_rank && r1 <= (a.rank + 1) * a.rows_per_rank);
}

// D tile (l, rows [r0, r0 + 64), cols [c0, c0 + 64)) from G and B: thread (ty, tx) of 16 x 16
// owns rows r0 + ty + 16 i and cols c0 + tx + 16 j, i, j < 4.
template <typename T>
__device__ void scalar_tile(const LadderArgs& a, int64_t l, int64_t r0, int64_t c0) {
  __shared__ float as[kTileK][kTileM];
  __shared__ float bs[kTileK][kTileN];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const T* g = static_cast<const T*>(a.g) + l * a.m * a.k;
  const T* b = static_cast<const T*>(a.b) + l * a.n * a.k;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < a.k; k0 += kTileK) {
    for (int e = tid; e < kTileM * kTileK; e += kThreads) {
      const int r = e / kTileK, kk = e % kTileK;  // A: K contiguous
      const int64_t row = r0 + r, k = k0 + kk;
      as[kk][r] = row < a.m && k < a.k ? static_cast<float>(g[row * a.k + k]) : 0.0f;
    }
    for (int e = tid; e < kTileN * kTileK; e += kThreads) {
      const int c = a.b_kn ? e % kTileN : e / kTileK, kk = a.b_kn ? e / kTileN : e % kTileK;
      const int64_t col = c0 + c, k = k0 + kk;
      const bool in = col < a.n && k < a.k;
      bs[kk][c] = in ? static_cast<float>(a.b_kn ? b[k * a.n + col] : b[col * a.k + k]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk)
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += as[kk][ty + 16 * i] * bs[kk][tx + 16 * j];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t row = r0 + ty + 16 * i, col = c0 + tx + 16 * j;
      if (row >= a.m || col >= a.n) continue;
      const int64_t at = (l * a.m + row) * a.n + col;
      float v = a.alpha * acc[i][j];
      if (a.c != nullptr) v += a.beta * static_cast<float>(static_cast<const T*>(a.c)[at]);
      static_cast<T*>(a.d)[at] = static_cast<T>(v);
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) threadload_gather_kernel(LadderArgs a, uint64_t* chunk_ready) {
  __shared__ int ok;
  const int64_t chunks = ladder_chunks(a.m);
  const int64_t first = a.rank * a.rows_per_rank / kLadderChunkRows;  // the chunk of my first row
  const auto chunk_at = [&](int64_t u) { return (first + u) % chunks; };
  const uint64_t seq = a.world > 1 ? a.seq[0] : 0;

  for (int64_t u = blockIdx.x; u < a.l * chunks; u += gridDim.x) {  // phase 1: gather
    const int64_t l = u / chunks, c = chunk_at(u % chunks);
    if (!chunk_has_peer_rows(a, c)) continue;
    if (!ladder_gather_chunk(a, l, c)) return;
    __syncthreads();  // every thread's stores, then one release (the grid-sync pattern)
    if (threadIdx.x == 0) {
      __threadfence();
      comm::st_release_sys(chunk_ready + l * chunks + c, seq);
    }
  }

  const int64_t tiles_n = (a.n + kTileN - 1) / kTileN;
  for (int64_t t = blockIdx.x; t < a.l * chunks * tiles_n; t += gridDim.x) {  // phase 2: compute
    const int64_t l = t / (chunks * tiles_n), c = chunk_at((t / tiles_n) % chunks), nt = t % tiles_n;
    if (chunk_has_peer_rows(a, c)) {
      if (threadIdx.x == 0)
        ok = comm::wait_geq(chunk_ready + l * chunks + c, seq, a.env, a.rank, comm::WaitSite::kGatheredChunk,
                            static_cast<int>(c));
      __syncthreads();
      if (!ok) return;
    }
    scalar_tile<T>(a, l, c * kTileM, nt * kTileN);
  }
}

class ThreadloadGather final : public LadderRung {
 public:
  explicit ThreadloadGather(const ImplContext& ctx) : LadderRung(ctx, false) {
    TeamState& t = *team_;
    t.agree_local("sizing the threadload_gather kernel", [&] {
      kernel_ = p_.dtype == DType::kBF16 ? threadload_gather_kernel<__nv_bfloat16> : threadload_gather_kernel<__half>;
      int per_sm = 0;
      TPGEMM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_, kThreads, 0));
      if (per_sm < 1) throw Error(ErrorCode::kInternal, "threadload_gather: its kernel cannot be resident on an SM");
      blocks_ = per_sm * t.num_sms;
      const int64_t chunks = ladder_chunks(p_.m);
      chunk_ready_ = DeviceBuffer(static_cast<size_t>(p_.l * chunks) * sizeof(uint64_t));
      t.zero_now(chunk_ready_.get(), chunk_ready_.bytes());
    });
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const LadderArgs a = publish_shard(o, stream);
    uint64_t* ready = chunk_ready_.as<uint64_t>();
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks_));
    cfg.blockDim = dim3(kThreads);
    cfg.stream = stream;
    cudaLaunchAttribute coop{};
    coop.id = cudaLaunchAttributeCooperative;
    coop.val.cooperative = 1;
    cfg.attrs = &coop;
    cfg.numAttrs = 1;
    TPGEMM_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel_, a, ready));
  }

 private:
  void (*kernel_)(LadderArgs, uint64_t*) = nullptr;
  int blocks_ = 0;
  DeviceBuffer chunk_ready_;
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_threadload_gather(const ImplContext& ctx) {
  return std::make_unique<ThreadloadGather>(ctx);
}

}  // namespace tpgemm::detail
