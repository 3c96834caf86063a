#include "ops/call_graphs.h"

#include <algorithm>

#include "core/check.h"
#include "core/env.h"

namespace tpgemm::detail {

bool call_graphs_enabled() {
  const auto v = env_string("TPGEMM_CALL_GRAPHS");
  return !(v && *v == "0");
}

void CallGraphs::run(const Key& key, cudaStream_t stream, const std::function<void(cudaStream_t)>& enqueue) {
  if (broken_) return enqueue(stream);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TPGEMM_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return enqueue(stream);  // into the caller's graph
  ++clock_;
  for (Entry& e : graphs_)
    if (e.key == key) {
      e.used = clock_;
      return e.graph.launch(stream);
    }
  if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) {
    seen_[seen_next_] = key;
    seen_next_ = (seen_next_ + 1) % kSeen;
    return enqueue(stream);
  }
  if (capture_stream_.get() == nullptr) capture_stream_ = Stream::create();
  CudaGraph graph;
  try {
    graph = CudaGraph::capture(capture_stream_.get(), [&] { enqueue(capture_stream_.get()); });
  } catch (const Error&) {
    // Nothing was enqueued (a capture records, it does not run): this call runs directly, and so
    // does every later one, rather than fail a call that a direct run serves.
    broken_ = true;
    graphs_.clear();
    return enqueue(stream);
  }
  if (static_cast<int>(graphs_.size()) == kGraphs)
    graphs_.erase(std::min_element(graphs_.begin(), graphs_.end(),
                                   [](const Entry& a, const Entry& b) { return a.used < b.used; }));
  graphs_.push_back({key, std::move(graph), clock_});
  graphs_.back().graph.launch(stream);
}

}  // namespace tpgemm::detail
