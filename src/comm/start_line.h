// Lines the ranks' GPUs up before timed work, so that one rank's host running late (a graph's
// launch, a page fault, the scheduler) is in no rank's timing.
//
// NOTE [start line]
// A timed replay of collective calls, started by each host on its own, begins on each GPU when
// its host gets there: the first call then waits for the latest rank, and that wait is counted
// in every other rank's time. On shapes of a few microseconds per call it was most of the spread
// between two timings of the same implementation. enqueue() puts a short hold (so that the host
// has enqueued what follows before the GPU reaches it) and a barrier of all ranks on the GPU
// before the caller's start event: the timed work then starts on every GPU within a flag's
// latency of the others.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "comm/signal_pad.h"
#include "core/cuda_raii.h"

namespace tpgemm::detail {
struct TeamState;
}

namespace tpgemm::comm {

class StartLine {
 public:
  // Collective. A signal pad where the ranks are LSA peers (a bounded wait), else NCCL.
  explicit StartLine(std::shared_ptr<detail::TeamState> team);
  void enqueue(cudaStream_t stream) const;

 private:
  std::shared_ptr<detail::TeamState> team_;
  SignalPad pad_;
  DeviceBuffer word_;  // the NCCL barrier's one element
};

}  // namespace tpgemm::comm
