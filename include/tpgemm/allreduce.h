// All-reduce (sum) over the team: NCCL, or tpgemm's one-shot / two-shot kernels over
// symmetric memory (NVLink loads and stores, fp32 accumulation, fixed reduction order).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "tpgemm/error.h"
#include "tpgemm/team.h"
#include "tpgemm/types.h"

namespace tpgemm {

namespace detail {
struct AllReduceState;
}

class AllReducePlan {
 public:
  // Collective. `count` elements of `dtype` per rank. The symmetric implementations allocate
  // their staging in NCCL symmetric memory: one-shot 2 W x the message, two-shot about 4 x
  // (kAuto picks them only up to 64 KB / 16 MB at W > 2, 1 MB / 256 MB at W = 2, and never
  // beyond 32 ranks).
  AllReducePlan(const Team& team, int64_t count, DType dtype,
                AllReduceImpl impl = AllReduceImpl::kAuto);
  ~AllReducePlan();
  AllReducePlan(AllReducePlan&&) noexcept;
  AllReducePlan& operator=(AllReducePlan&&) noexcept;

  // out = sum over ranks of in: any device buffers of `count` elements, 16-byte aligned;
  // `out` may equal `in` (else they must not overlap). The symmetric kernels copy `in` into
  // their own symmetric memory as they start (nothing to register or write beforehand).
  // Successive calls of one plan must be ordered: issue them on one stream (a CUDA graph
  // replays them in order too). After a Timeout the team has failed: calls already enqueued
  // or replayed from a graph leave `out` undefined; Team::check() reports the failure.
  void run(const void* in, void* out, cudaStream_t stream);
  // The same for this call's `count` elements (1 to count(), a multiple of 8, the same on every
  // rank): one plan serves messages of any size up to the one it was made for.
  void run(const void* in, void* out, int64_t count, cudaStream_t stream);
  AllReduceImpl impl() const;
  int64_t count() const;

 private:
  std::unique_ptr<detail::AllReduceState> state_;
};

}  // namespace tpgemm
