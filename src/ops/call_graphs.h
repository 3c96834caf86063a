// Calls of one implementation replayed from CUDA graphs, keyed by their operands' addresses.
//
// NOTE [call graphs]
// A call's host cost is its enqueue: pipelined_ce alone makes 20 to 40 CUDA calls per run (its
// copies, matmuls, flag kernels and the events between its streams), some 100 us of host time
// that a small matmul cannot hide. A model calls a plan with the same addresses over and over
// (its weights, and activations that the caching allocator hands back in the same order), so a
// call whose addresses and M were seen among the last calls is captured once as a CUDA graph of
// its enqueue and from then on launched as that graph: one launch in place of the many (which
// calls, and how many graphs are kept: src/ops/replay_cache.h).
// A call seen for the first time runs directly, so a program whose addresses never repeat pays a
// lookup and a note of the addresses (some hundred nanoseconds) and nothing more. A replay is the
// same work as a direct run: every implementation can be captured (the tuner times each from
// graphs) and keeps its per-call state on the device (the signal pads' epochs, the timeouts
// relative to each wait's start), though its kernels run at the launching stream's priority, not
// at the side streams' higher one. The caller's own graph capture takes the calls directly (a
// graph is not launched into a capture), and the baseline, whose collectives are NCCL's, always
// runs directly: NCCL keeps resources for each captured collective. On by default;
// TPGEMM_CALL_GRAPHS=0 when a plan is made turns it off for that plan.
// Graphs are not free to keep: the driver launches a graph it launched lately at once, one
// launched longer ago at a few microseconds more, and with the GPU busy and many graphs alive a
// launch was seen to wait for the GPU, where a direct call never does (docs/perf.md, host time).
// How far ahead of its GPU that lets a host run is the open question behind kGraphs.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "core/cuda_raii.h"
#include "ops/replay_cache.h"

namespace tpgemm::detail {

// Whether plans made now replay their calls (TPGEMM_CALL_GRAPHS: "0" off, else on).
bool call_graphs_enabled();

class CallGraphs {
 public:
  using Key = CallKey;

  // Enqueues a call on `stream` through enqueue(s), which puts its work on stream s: as the
  // graph of `key` where there is one; captured into one first (on a stream of its own) where
  // the cache says so; else directly. A capture that fails turns the graphs off for this
  // implementation, and the call runs directly.
  void run(const Key& key, cudaStream_t stream, const std::function<void(cudaStream_t)>& enqueue);

 private:
  ReplayCache<CudaGraph> cache_;
  Stream capture_stream_;
  bool broken_ = false;  // a capture failed: every call runs directly
};

}  // namespace tpgemm::detail
