// Device-side memory ordering and bounded waits for flags in symmetric memory.
#pragma once

#include <cstdint>

#include "comm/device/wait_env.h"

namespace tpgemm::comm {

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// ---- NOTE [dependent launch] ----------------------------------------------------------------
// A kernel launched with programmatic stream serialization (cudaLaunchAttributeProgrammatic-
// StreamSerialization) may start while the kernel before it on the stream still runs, which hides
// its launch: at a few microseconds a call, the symmetric collectives' largest fixed cost.
// wait_prior_grid() returns once that kernel has finished and its writes are visible; before
// it, a kernel may read only its parameters and write only its shared memory: the input, the
// call counters and the staging may all be written, or still be read, by the kernel before (NOTE
// [two staging halves] holds since no store of call e + 1 precedes the end of call e).
// allow_dependents() lets the next such kernel launch: its blocks then wait in their own
// wait_prior_grid() for this grid to end. Both are no-ops in a kernel launched plainly.
__device__ __forceinline__ void wait_prior_grid() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void allow_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ bool tripped(const WaitEnv& env) {
  return *reinterpret_cast<volatile int32_t*>(env.tripped) != 0;
}

// `env` by value: a generic pointer to a kernel parameter makes ptxas copy the kernel's
// parameters into local memory, in every thread, at the kernel's start.
__device__ __noinline__ inline void report_timeout(WaitEnv env, int peer, WaitSite site, int index,
                                                  uint64_t expected, uint64_t seen, uint64_t waited_ns) {
  if (atomicCAS(env.tripped, 0, 1) != 0) return;  // someone else reported first
  TimeoutRecord* r = env.record;
  r->rank = env.rank;
  r->peer = peer;
  r->site = static_cast<int32_t>(site);
  r->index = index;
  r->expected = expected;
  r->seen = seen;
  r->waited_ns = waited_ns;
  __threadfence_system();
  *reinterpret_cast<volatile int32_t*>(&r->code) = 1;
  __threadfence_system();
}

// Waits until *flag >= expected (acquire, system scope). Returns false, after reporting,
// if the wait ran past env.timeout_ns or another wait on this GPU already failed.
__device__ __forceinline__ bool wait_geq(const uint64_t* flag, uint64_t expected, const WaitEnv& env, int peer,
                                         WaitSite site, int index) {
  uint64_t seen = ld_acquire_sys(flag);
  if (seen >= expected) return true;
  const uint64_t t0 = global_timer_ns();
  for (uint32_t spin = 0;; ++spin) {
    seen = ld_acquire_sys(flag);
    if (seen >= expected) return true;
    if ((spin & 63) == 0) {
      if (tripped(env)) return false;
      const uint64_t waited = global_timer_ns() - t0;
      if (waited > env.timeout_ns) {
        report_timeout(env, peer, site, index, expected, seen, waited);
        return false;
      }
    }
  }
}

}  // namespace tpgemm::comm
