// Checking every CUDA, cuBLASLt and NCCL return code: failures become tpgemm::Error with the
// call, the file and line, and the library's own message.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "core/format.h"
#include "tpgemm/error.h"

#define TPGEMM_CUDA_CHECK(expr)                                                                      \
  do {                                                                                               \
    const cudaError_t tpgemm_e_ = (expr);                                                            \
    if (tpgemm_e_ != cudaSuccess)                                                                    \
      throw ::tpgemm::Error(::tpgemm::ErrorCode::kCudaError,                                         \
                            ::tpgemm::strfmt("%s failed at %s:%d: %s (%s)", #expr, __FILE__, __LINE__, \
                                             cudaGetErrorString(tpgemm_e_), cudaGetErrorName(tpgemm_e_))); \
  } while (0)

#define TPGEMM_CUBLAS_CHECK(expr)                                                                     \
  do {                                                                                                \
    const cublasStatus_t tpgemm_s_ = (expr);                                                          \
    if (tpgemm_s_ != CUBLAS_STATUS_SUCCESS)                                                           \
      throw ::tpgemm::Error(::tpgemm::ErrorCode::kCudaError,                                          \
                            ::tpgemm::strfmt("%s failed at %s:%d: cuBLAS status %d", #expr, __FILE__, \
                                             __LINE__, static_cast<int>(tpgemm_s_)));                 \
  } while (0)

#define TPGEMM_NCCL_CHECK(expr)                                                                       \
  do {                                                                                                \
    const ncclResult_t tpgemm_r_ = (expr);                                                            \
    if (tpgemm_r_ != ncclSuccess && tpgemm_r_ != ncclInProgress)                                      \
      throw ::tpgemm::Error(::tpgemm::ErrorCode::kNcclError,                                          \
                            ::tpgemm::strfmt("%s failed at %s:%d: %s (%s)", #expr, __FILE__, __LINE__, \
                                             ncclGetErrorString(tpgemm_r_), ncclGetLastError(nullptr)));  \
  } while (0)

// For launches: the launch error, if any (asynchronous faults surface at the next sync).
#define TPGEMM_CHECK_LAUNCH() TPGEMM_CUDA_CHECK(cudaGetLastError())

namespace tpgemm {

// Whether `stream` is capturing a CUDA graph. A failed query (a bad stream) is returned, not
// thrown: in a collective call it is this rank's verdict, which its peers must hear of.
inline Status query_capturing(cudaStream_t stream, bool* capturing) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  *capturing = false;
  try {
    TPGEMM_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  } catch (const Error& e) {
    return e.status();
  }
  *capturing = capture != cudaStreamCaptureStatusNone;
  return Status::Ok();
}

}  // namespace tpgemm

#include "core/assert.h"
