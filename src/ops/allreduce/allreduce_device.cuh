// Device pieces the one-shot and two-shot kernels share (NOTE [all-reduce flags]).
#pragma once

#include "comm/device/sync.cuh"
#include "ops/allreduce/symm_allreduce.h"
#include "ops/common/vec.cuh"

namespace tpgemm::ops {

enum AllReduceGroup : int { kStartGroup = 0, kMiddleGroup = 1 };
constexpr int kAllReduceThreads = 512;

// Block b's call number for this call (its counter + 1), broadcast to the block. Only block b
// touches calls[b]: it stores the new value in end_call().
__device__ __forceinline__ uint64_t begin_call(const SymmAllReduceArgs& a) {
  __shared__ uint64_t e;
  if (threadIdx.x == 0) e = a.calls[blockIdx.x] + 1;
  __syncthreads();
  return e;
}
__device__ __forceinline__ void end_call(const SymmAllReduceArgs& a, uint64_t e) {
  if (threadIdx.x == 0) a.calls[blockIdx.x] = e;
}

__device__ __forceinline__ uint64_t* flag(const SymmAllReduceArgs& a, int owner, int group, int source) {
  return a.pads[owner] + (static_cast<int64_t>(group) * gridDim.x + blockIdx.x) * a.world + source;
}

// After the block's stores so far: threads 0..W-1 raise `group` for this block in every peer's
// pad. (The CTA barrier orders the other threads' stores before the sys-scope release.)
__device__ __forceinline__ void raise_all(const SymmAllReduceArgs& a, int group, uint64_t value) {
  __syncthreads();
  const int q = threadIdx.x;
  if (q < a.world && q != a.env.rank) comm::st_release_sys(flag(a, q, group, a.env.rank), value);
}

// Threads 0..W-1 wait for `group` of this block from every peer, then the block syncs. False,
// for the whole block alike, if a wait on this GPU has failed.
__device__ __forceinline__ bool await_all(const SymmAllReduceArgs& a, int group, uint64_t value, comm::WaitSite site) {
  const int q = threadIdx.x;
  if (q < a.world && q != a.env.rank) comm::wait_geq(flag(a, a.env.rank, group, q), value, a.env, q, site, group);
  return __syncthreads_and(!comm::tripped(a.env));
}

// Copies vectors v, v + stride, ... below `end` of `from` to `to` (16-byte vectors, kUnroll in flight).
template <int kUnroll>
__device__ __forceinline__ void copy_vectors(const uint4* from, uint4* to, int64_t v, int64_t stride, int64_t end) {
  for (; v < end; v += stride * kUnroll) {
    uint4 x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (v + u * stride < end) x[u] = from[v + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (v + u * stride < end) to[v + u * stride] = x[u];
  }
}

// Unrolling: vectors per thread per loop trip. With the world size known at compile time (kW > 0)
// all kW x kUnroll loads of a trip are in flight before the first add; kW == 0 serves any other
// world size, one load at a time.
template <int kW>
constexpr int kUnrollFor = kW == 0 ? 1 : (kW <= 4 ? 4 : 2);

// acc[u] = sum over ranks q = 0..W-1, in that order (fp32), of vector v + u * stride of bufs[q],
// for each u whose vector is below `end` (the others are left zero).
template <typename T, int kW, int kUnroll>
__device__ __forceinline__ void sum_ranks(const T* const* bufs, int world, int64_t v, int64_t stride, int64_t end,
                                          float (&acc)[kUnroll][8]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[u][i] = 0.0f;
  if constexpr (kW > 0) {
    uint4 raw[kUnroll][kW];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int q = 0; q < kW; ++q)
        raw[u][q] = v + u * stride < end ? *reinterpret_cast<const uint4*>(bufs[q] + (v + u * stride) * 8) : uint4{};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int q = 0; q < kW; ++q) add_raw8<T>(raw[u][q], acc[u]);
  } else {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (v + u * stride < end)
        for (int q = 0; q < world; ++q) add8(bufs[q] + (v + u * stride) * 8, acc[u]);
  }
}

// acc rounded to T and widened again: the value a peer reads back from a stored sum.
template <typename T>
__device__ __forceinline__ void round8(float (&acc)[8]) {
  alignas(16) T tmp[8];
  store8(tmp, acc);
  load8(tmp, acc);
}

template <typename T>
__device__ __forceinline__ void add_beta_c(const SymmAllReduceArgs& a, int64_t off, float (&acc)[8]) {
  if (a.c == nullptr) return;
  float x[8];
  load8(static_cast<const T*>(a.c) + off, x);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] += a.beta * x[i];
}

}  // namespace tpgemm::ops
