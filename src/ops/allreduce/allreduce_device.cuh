// Device pieces the symmetric collectives' kernels share (one-shot, two-shot and its reduce-scatter,
// all-gather; NOTE [empty lanes]).
#pragma once

#include "comm/device/sync.cuh"
#include "ops/allreduce/symm_collective.h"
#include "ops/common/vec.cuh"

namespace tpgemm::ops {

// The instance of a kernel template for `dtype` and this world size, as `pick.template
// operator()<T, W>()` returns it: unrolled for 2, 4 and 8 ranks, W = 0 (a loop over the ranks)
// for any other.
template <class Pick>
const void* kernel_instance(DType dtype, int world, Pick pick) {
  const auto for_type = [&]<class T>() -> const void* {
    switch (world) {
      case 2: return pick.template operator()<T, 2>();
      case 4: return pick.template operator()<T, 4>();
      case 8: return pick.template operator()<T, 8>();
      default: return pick.template operator()<T, 0>();
    }
  };
  return dtype == DType::kBF16 ? for_type.template operator()<__nv_bfloat16>() : for_type.template operator()<__half>();
}

// ---- NOTE [one-load prologue] -------------------------------------------------------------
// A small collective takes a few microseconds, and each global load that its first NVLink store
// waits for behind another adds a fraction of one. So a kernel's prologue reads from global memory
// at once, after comm::wait_prior_grid() (NOTE [dependent launch], comm/device/sync.cuh) and
// before its one barrier, all it needs: the trip flag (every thread), the block's call
// counter (thread 0) and the thread's first input vector; the staging addresses come from the
// kernel's parameters, for both halves, since the half is known only after the barrier.
// The parameters are __grid_constant__, and nothing takes a generic pointer to them that escapes
// into a call (report_timeout takes its WaitEnv by value): otherwise ptxas copies them into local
// memory in every thread before anything else (tests/check_no_param_copy.sh counts the STL/LDL
// of every kernel in `cuobjdump -sass`; a few may be spills). Together the two took about a
// fifth off the small collectives' latency (docs/perf.md, the all-reduce tables).

// The kernels' shared tables hold one entry per rank.
static_assert(plan::kMaxSymmetricWorld <= 32, "shared slot tables are [32]");

// Starts block b's call: e = its call number (its counter + 1), broadcast to the block. False,
// for the whole block, if a wait on this GPU has already failed. Ends with a barrier, so shared
// tables filled before it are ready, and lets the next kernel launch (NOTE [dependent launch]):
// every block of this one is running by then. Only block b touches calls[b]: it stores e in
// end_call(). A kernel launched as a dependent calls comm::wait_prior_grid() first.
__device__ __forceinline__ bool begin_call(const SymmCollectiveArgs& a, uint64_t& e) {
  __shared__ uint64_t call;
  const bool trip = comm::tripped(a.env);  // in flight beside the counter's load
  if (threadIdx.x == 0) call = a.calls[blockIdx.x] + 1;
  if (__syncthreads_or(trip)) return false;
  comm::allow_dependents();
  e = call;
  return true;
}
__device__ __forceinline__ void end_call(const SymmCollectiveArgs& a, uint64_t e) {
  if (threadIdx.x == 0) a.calls[blockIdx.x] = e;
}

// Rank q's staging buffer, half h, as vectors.
__device__ __forceinline__ uint4* stage_half(const SymmCollectiveArgs& a, int q, int h, int64_t half_vecs) {
  return static_cast<uint4*>(a.stage[q]) + h * half_vecs;
}

// The slot tables of both staging halves of `half_vecs` vectors, each starting with W slots of
// `vecs` vectors, slot q written by rank q (one-shot, all-gather, the decode kernel's partials):
// slot_at[h][q] = my slot in rank q's half h, slots[h][q] = slot q of my own half h. Filled by
// the first W threads from the parameters, before begin_call's barrier.
__device__ __forceinline__ void fill_slot_tables(const SymmCollectiveArgs& a, int world, int64_t vecs,
                                                 int64_t half_vecs, uint4* (&slot_at)[2][32],
                                                 uint4* (&slots)[2][32]) {
  const int me = a.env.rank;
  if (threadIdx.x < world) {
    const int q = threadIdx.x;
    for (int h = 0; h < 2; ++h) {
      slot_at[h][q] = stage_half(a, q, h, half_vecs) + me * vecs;
      slots[h][q] = stage_half(a, me, h, half_vecs) + q * vecs;
    }
  }
}

// The thread's first input vector, v = first (if below `end`), read in the prologue.
__device__ __forceinline__ uint4 first_vector(const SymmCollectiveArgs& a, int64_t first, int64_t end) {
  return first < end ? static_cast<const uint4*>(a.in)[first] : uint4{};
}

// ---- NOTE [empty lanes] ------------------------------------------------------------------
// Empty is the bit pattern 0x0000 (+0.0) in a 16-bit lane, what a fresh symmetric buffer
// holds. A sender writes +0.0 as -0.0 (0x8000), equal in value; the receiver, which empties
// each vector once it has read it, writes -0.0 results out as +0.0, so every rank's output is
// bitwise the same. A 16-bit lane is written whole, so a lane that is not empty holds its final
// value even if the 16-byte store lands in pieces.

__device__ __forceinline__ bool any_lane_empty(const uint4& v) {
  bool empty = false;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t w = (&v.x)[i];
    empty |= (w & 0xffffu) == 0u || (w >> 16) == 0u;
  }
  return empty;
}

// +0.0 lanes as -0.0, so that no lane sent looks empty.
__device__ __forceinline__ uint4 never_empty(uint4 v) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t& w = (&v.x)[i];
    if ((w & 0xffffu) == 0u) w |= 0x8000u;
    if ((w >> 16) == 0u) w |= 0x80000000u;
  }
  return v;
}

// -0.0 lanes back to +0.0 (the inverse of never_empty on zeros).
__device__ __forceinline__ uint4 plain_zeros(uint4 v) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t& w = (&v.x)[i];
    if ((w & 0xffffu) == 0x8000u) w &= 0xffff0000u;
    if ((w >> 16) == 0x8000u) w &= 0x0000ffffu;
  }
  return v;
}

// Peers store into this memory behind the cache's back: read it from L2 every time.
__device__ __forceinline__ uint4 ld_volatile(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// `v` holds a first read of *p; polls *p until no lane is empty. False (after reporting, or
// once another wait on this GPU failed) if peer `q` did not fill it within the timeout.
__device__ __forceinline__ bool wait_filled(const uint4* p, uint4& v, const comm::WaitEnv& env, int q,
                                            comm::WaitSite site) {
  if (!any_lane_empty(v)) return true;
  const uint64_t t0 = comm::global_timer_ns();
  for (uint32_t spin = 1;; ++spin) {
    v = ld_volatile(p);
    if (!any_lane_empty(v)) return true;
    if ((spin & 63) == 0) {
      if (comm::tripped(env)) return false;
      const uint64_t waited = comm::global_timer_ns() - t0;
      if (waited > env.timeout_ns) {
        comm::report_timeout(env, q, site, 0, 1, 0, waited);
        return false;
      }
    }
  }
}

// acc[u] = sum over slots q = 0..W-1, in that order (fp32), of vector v + u * stride of
// slot[q] (vectors), for each u whose vector is below `end`, waiting for each to fill and
// emptying it after. kW > 0: W known at compile time, all kW x kUnroll first reads in flight
// at once; kW == 0: any W, one at a time. False if a wait failed.
template <typename T, int kW, int kUnroll>
__device__ __forceinline__ bool sum_slots(uint4* const* slot, int world, int64_t v, int64_t stride, int64_t end,
                                          const comm::WaitEnv& env, comm::WaitSite site, float (&acc)[kUnroll][8]) {
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
        if (v + u * stride < end) raw[u][q] = ld_volatile(slot[q] + v + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int q = 0; q < kW; ++q)
        if (v + u * stride < end) {
          if (!wait_filled(slot[q] + v + u * stride, raw[u][q], env, q, site)) return false;
          add_raw8<T>(raw[u][q], acc[u]);
          slot[q][v + u * stride] = uint4{};
        }
  } else {
    for (int u = 0; u < kUnroll; ++u)
      for (int q = 0; q < world && v + u * stride < end; ++q) {
        uint4* p = slot[q] + v + u * stride;
        uint4 x = ld_volatile(p);
        if (!wait_filled(p, x, env, q, site)) return false;
        add_raw8<T>(x, acc[u]);
        *p = uint4{};
      }
  }
  return true;
}

// Vectors in flight per thread: W x kUnroll polls without spilling registers.
template <int kW>
constexpr int kUnrollFor = kW > 0 && kW <= 4 ? 2 : 1;

// out[v] = the rounded sum (+ beta * c[v], rounded again), with -0.0 lanes as +0.0. Vectors.
template <typename T>
__device__ __forceinline__ void store_sum(uint4* out, const void* c, float beta, int64_t v, uint4 sum) {
  if (c == nullptr) {
    out[v] = plain_zeros(sum);
    return;
  }
  float acc[8] = {}, x[8];
  add_raw8<T>(sum, acc);
  widen8<T>(static_cast<const uint4*>(c)[v], x);
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] += beta * x[i];
  out[v] = plain_zeros(pack8<T>(acc));
}

template <typename T>
__device__ __forceinline__ void write_out(const SymmCollectiveArgs& a, int64_t v, uint4 sum) {
  store_sum<T>(static_cast<uint4*>(a.out), a.c, a.beta, v, sum);
}

}  // namespace tpgemm::ops
