#include "ops/call_graphs.h"

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
  if (CudaGraph* g = cache_.find(key)) return g->launch(stream);
  if (!cache_.should_capture(key)) return enqueue(stream);
  if (capture_stream_.get() == nullptr) capture_stream_ = Stream::create();
  CudaGraph graph;
  try {
    graph = CudaGraph::capture(capture_stream_.get(), [&] { enqueue(capture_stream_.get()); });
  } catch (const Error&) {
    // Nothing was enqueued (a capture records, it does not run): this call runs directly, and so
    // does every later one, rather than fail a call that a direct run serves.
    broken_ = true;
    cache_.clear();
    return enqueue(stream);
  }
  cache_.add(key, std::move(graph)).launch(stream);
}

}  // namespace tpgemm::detail
