// Device pieces the one-shot and two-shot kernels share (NOTE [all-reduce flags]).
#pragma once

#include "comm/device/sync.cuh"
#include "ops/allreduce/symm_allreduce.h"
#include "ops/common/vec.cuh"

namespace tpgemm::ops {

enum AllReduceGroup : int { kStartGroup = 0, kMiddleGroup = 1, kEndGroup = 2 };
constexpr int kAllReduceThreads = 512;

// This call's epoch. Every block reads it before any block could publish the next one
// (only the last block to finish does, in finish()).
__device__ __forceinline__ uint64_t call_epoch(const SymmAllReduceArgs& a) {
  return *reinterpret_cast<volatile uint64_t*>(a.control) + 1;
}

// Threads 0..W-1 of the calling block raise `group` in every peer's pad, one flag each.
__device__ __forceinline__ void raise_all(const SymmAllReduceArgs& a, int group, uint64_t value) {
  const int q = threadIdx.x;
  if (q < a.world && q != a.env.rank) comm::st_release_sys(a.pads[q] + group * a.world + a.env.rank, value);
}

// Threads 0..W-1 wait for `group` from every peer, then the block syncs. False, for the whole
// block alike, if a wait on this GPU has failed.
__device__ __forceinline__ bool await_all(const SymmAllReduceArgs& a, int group, uint64_t value, comm::WaitSite site) {
  const int q = threadIdx.x;
  if (q < a.world && q != a.env.rank)
    comm::wait_geq(a.pads[a.env.rank] + group * a.world + q, value, a.env, q, site, group);
  return __syncthreads_and(!comm::tripped(a.env));
}

// Counts this block into control[slot] (monotonic); true for the block that completes call e.
__device__ __forceinline__ bool arrive_block(const SymmAllReduceArgs& a, int slot, uint64_t e) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();  // this block's stores are visible (to peers too) before it is counted
    last = atomicAdd(reinterpret_cast<unsigned long long*>(a.control + slot), 1ull) + 1 == e * gridDim.x;
  }
  __syncthreads();
  return last;
}

// The end protocol: the last block to finish tells every peer this rank is done reading their
// buffers, waits until they all say the same, and publishes the epoch for the next call.
__device__ __forceinline__ void finish(const SymmAllReduceArgs& a, uint64_t e) {
  if (!arrive_block(a, 2, e)) return;
  raise_all(a, kEndGroup, e);
  await_all(a, kEndGroup, e, comm::WaitSite::kAllReduceEnd);
  if (threadIdx.x == 0) *reinterpret_cast<volatile uint64_t*>(a.control) = e;
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
