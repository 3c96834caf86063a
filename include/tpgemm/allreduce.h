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
  // Collective. Messages of up to `count` elements of `dtype` per rank. With kAuto each call runs
  // the algorithm that was fastest on this team at its size: making the plan times NCCL, one-shot
  // and two-shot at the powers of two from 4 KiB up to the message rounded up to a power of two
  // (at most 256 MiB; NCCL beyond) that the team has not timed yet, once per team and size (each
  // algorithm made as a plan of that size, then graph replays of its calls, at most 20 ms of them;
  // selection() lists the times; NOTE [measured all-reduce]). With tuning off (TPGEMM_TUNE=0, or
  // `tune` below) rules measured on H200 decide: one-shot up to 64 KB (1 MB at W = 2), two-shot up
  // to 16 MB (256 MB at W = 2), NCCL above. NCCL runs counts that are not a
  // multiple of 8, on one rank (nothing to exchange), beyond 32 ranks and where not every rank is
  // an NVLink peer. `tune`: kOff takes the rules whatever TPGEMM_TUNE says (their choice by size
  // is the same in every process, where timings within noise of each other may not be: each
  // algorithm sums in a fixed order, but not in the same one); kDefault follows TPGEMM_TUNE.
  // oneshot and twoshot take plan and call counts that are multiples of 8 only and run every call
  // (on one rank, NCCL does, and takes any count). The symmetric
  // algorithms stage in NCCL symmetric memory, one-shot 2 W x the largest message it takes in
  // this plan, two-shot about 4 x: the plan's own algorithm's is made with the plan, another's
  // on the first call that takes it (or by prepare()). Made on the team's GPU; this, prepare()
  // and run() leave the caller's current device as they found it.
  AllReducePlan(const Team& team, int64_t count, DType dtype,
                AllReduceImpl impl = AllReduceImpl::kAuto,
                PlanOptions::Tune tune = PlanOptions::Tune::kDefault);
  ~AllReducePlan();
  AllReducePlan(AllReducePlan&&) noexcept;
  AllReducePlan& operator=(AllReducePlan&&) noexcept;

  // out = sum over ranks of in: any device buffers of `count` elements (aligned as below);
  // `out` may equal `in` (else they must not overlap). The symmetric kernels copy `in` into
  // their own symmetric memory as they start (nothing to register or write beforehand).
  // Successive calls of one plan must be ordered: issue them on one stream (a CUDA graph
  // replays them in order too). After a Timeout the team has failed: calls already enqueued
  // or replayed from a graph leave `out` undefined; Team::check() reports the failure.
  void run(const void* in, void* out, cudaStream_t stream);
  // The same for this call's `count` elements (1 to count(), the same on every rank): one plan
  // serves messages of any size up to the one it was made for. A call whose algorithm is not
  // made yet makes it (collectively, like the plan); under CUDA-graph capture, where nothing can
  // be made, it runs the plan's own algorithm instead: prepare() first to capture its own.
  // Symmetric kernels need `in` and `out` 16-byte aligned; NCCL's calls take any alignment.
  void run(const void* in, void* out, int64_t count, cudaStream_t stream);
  // Collective: makes the algorithm that calls of `count` elements run, now, outside any capture.
  void prepare(int64_t count);
  // The algorithm of a call of count() elements, and of `count` (1 to count(); else
  // InvalidArgument) elements; under capture, a call whose algorithm is not made yet runs the
  // plan's own, impl(), instead (run() above).
  AllReduceImpl impl() const;
  AllReduceImpl impl(int64_t count) const;
  int64_t count() const;
  // How auto chooses: tuned (every timed size's times in ms per call, slowest rank, and its
  // winner; tuning_ms: this plan's share of the timing), the rules (fallback), or asked for.
  const PlanSelection& selection() const;

 private:
  std::unique_ptr<detail::AllReduceState> state_;
};

}  // namespace tpgemm
