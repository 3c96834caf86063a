// Device side of NOTE [ladder protocol]: waiting for a row's owner, and the block-wide gather of
// one chunk of rows with thread loads over NVLink (the study's "threadload gather").
#pragma once

#include <cstdint>

#include "comm/device/sync.cuh"
#include "ops/ag_gemm/ladder.h"

namespace tpgemm::detail {

__device__ __forceinline__ int ladder_owner(const LadderArgs& a, int64_t row) {
  return static_cast<int>(row / a.rows_per_rank);
}

// Bounded wait (one thread) until `owner`'s shard is in its G. False after a timeout, reported.
__device__ __forceinline__ bool ladder_owner_ready(const LadderArgs& a, int owner) {
  if (owner == a.rank) return true;  // copied by this stream before the kernel
  return comm::wait_geq(a.ready + owner, a.seq[0], a.env, owner, comm::WaitSite::kShardReady, 0);
}

// Rows of chunk `chunk` of batch entry `l` that other ranks own: from their G into mine, with
// 16-byte thread loads (K % 8 == 0), each owner's rows read after its flag. Block-wide (every
// thread calls it); false, on every thread, if a wait failed.
__device__ inline bool ladder_gather_chunk(const LadderArgs& a, int64_t l, int64_t chunk) {
  __shared__ int ok;
  const int64_t r0 = chunk * kLadderChunkRows, r1 = min(r0 + kLadderChunkRows, a.m);
  const int64_t vecs_per_row = a.k / 8;
  for (int q = ladder_owner(a, r0); q <= ladder_owner(a, r1 - 1); ++q) {
    if (q == a.rank) continue;
    if (threadIdx.x == 0) ok = ladder_owner_ready(a, q);
    __syncthreads();
    const bool go = ok;
    __syncthreads();  // nobody rewrites `ok` before every thread has read it
    if (!go) return false;
    const int64_t b = max(r0, q * a.rows_per_rank), e = min(r1, (q + 1) * a.rows_per_rank);
    const int64_t first = (l * a.m + b) * vecs_per_row, count = (e - b) * vecs_per_row;
    const auto* src = static_cast<const uint4*>(a.g_peers[q]) + first;
    auto* dst = static_cast<uint4*>(a.g) + first;
    // Four loads in flight per thread: a single NVLink read is latency-bound.
    constexpr int kInFlight = 4;
    const int64_t step = static_cast<int64_t>(blockDim.x) * kInFlight;
    for (int64_t v = threadIdx.x; v < count; v += step) {
      uint4 x[kInFlight];
#pragma unroll
      for (int i = 0; i < kInFlight; ++i)
        if (v + i * blockDim.x < count) x[i] = src[v + i * blockDim.x];
#pragma unroll
      for (int i = 0; i < kInFlight; ++i)
        if (v + i * blockDim.x < count) dst[v + i * blockDim.x] = x[i];
    }
  }
  return true;
}

}  // namespace tpgemm::detail
