// Owners for CUDA device memory, streams, events and graphs (header-only; the CUDA runtime is the
// only dependency).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <utility>

#include "core/check.h"

namespace tpgemm {

// NOTE [lazy loading]
// The CUDA runtime loads a kernel on its first launch (CUDA_MODULE_LOADING=LAZY, the default),
// and loading waits for the kernels already running. A kernel launched beside a persistent
// kernel that waits for it (a barrier or flag kernel beside the fused GEMM) would then never
// start: the two wait on each other until the bounded wait gives up (measured on an H200,
// tests/gpu/test_chunk_wait.cu). Such kernels are loaded ahead, when their plan is built.
template <class... Params>
void load_kernel_now(void (*kernel)(Params...)) {
  cudaFuncAttributes attributes{};
  TPGEMM_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
}

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) TPGEMM_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Makes `device` current for its scope and the caller's device current again after it: for a
// call that may allocate (a plan's lazily made parts) on a thread whose current device is not the
// plan's, without leaving the caller's device changed.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    TPGEMM_CUDA_CHECK(cudaGetDevice(&caller_));
    if (caller_ != device) TPGEMM_CUDA_CHECK(cudaSetDevice(device));
    changed_ = caller_ != device;
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(caller_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int caller_ = 0;
  bool changed_ = false;
};

class Stream {
 public:
  Stream() = default;
  // priority: lower numbers are higher priority; see cudaDeviceGetStreamPriorityRange.
  static Stream create(int priority = 0) {
    Stream s;
    TPGEMM_CUDA_CHECK(cudaStreamCreateWithPriority(&s.s_, cudaStreamNonBlocking, priority));
    return s;
  }
  static Stream highest_priority() {
    int least = 0, greatest = 0;
    TPGEMM_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return create(greatest);
  }
  ~Stream() {
    if (s_ != nullptr) cudaStreamDestroy(s_);
  }
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept {
    std::swap(s_, o.s_);
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() = default;
  static Event create(bool timing = false) {
    Event e;
    TPGEMM_CUDA_CHECK(cudaEventCreateWithFlags(&e.e_, timing ? cudaEventDefault : cudaEventDisableTiming));
    return e;
  }
  ~Event() {
    if (e_ != nullptr) cudaEventDestroy(e_);
  }
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(e_, o.e_);
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

// The work `enqueue` puts on `stream`, captured (thread-local mode unless `mode` says otherwise:
// torch captures in global mode) into a CUDA graph and instantiated, ready to replay. The capture
// ends even if `enqueue` throws (the error is its).
class CudaGraph {
 public:
  CudaGraph() = default;
  static CudaGraph capture(cudaStream_t stream, const std::function<void()>& enqueue,
                           cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
    cudaGraph_t graph = nullptr;
    TPGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, mode));
    try {
      enqueue();
    } catch (...) {
      if (cudaStreamEndCapture(stream, &graph) == cudaSuccess && graph != nullptr) cudaGraphDestroy(graph);
      (void)cudaGetLastError();  // (as below; the error is enqueue's)
      throw;
    }
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    CudaGraph g;
    const cudaError_t made = ended == cudaSuccess ? cudaGraphInstantiate(&g.exec_, graph, 0) : ended;
    if (graph != nullptr) TPGEMM_CUDA_CHECK(cudaGraphDestroy(graph));
    // A failed capture's error (an invalidated capture, say) is reported here, once, and not left
    // for the next launch check of whatever the caller enqueues instead.
    if (made != cudaSuccess) (void)cudaGetLastError();
    TPGEMM_CUDA_CHECK(made);
    return g;
  }
  void launch(cudaStream_t stream) const { TPGEMM_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }
  ~CudaGraph() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  CudaGraph(CudaGraph&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)) {}
  CudaGraph& operator=(CudaGraph&& o) noexcept {
    std::swap(exec_, o.exec_);
    return *this;
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

 private:
  cudaGraphExec_t exec_ = nullptr;
};

// The work `enqueue` puts on `stream`, between two timing events, waited for: the time between
// them in ms. `wait`, where given, waits for the stream instead of the stop event (a bounded
// wait, for work that waits on other ranks).
inline float time_between(cudaStream_t stream, const Event& start, const Event& stop,
                          const std::function<void()>& enqueue, const std::function<void()>& wait = nullptr) {
  TPGEMM_CUDA_CHECK(cudaEventRecord(start.get(), stream));
  enqueue();
  TPGEMM_CUDA_CHECK(cudaEventRecord(stop.get(), stream));
  if (wait) wait();
  else TPGEMM_CUDA_CHECK(cudaEventSynchronize(stop.get()));
  float ms = 0;
  TPGEMM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
  return ms;
}

}  // namespace tpgemm
