#include "tpgemm/error.h"

namespace tpgemm {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kUnsupported: return "Unsupported";
    case ErrorCode::kCudaError: return "CudaError";
    case ErrorCode::kNcclError: return "NcclError";
    case ErrorCode::kTimeout: return "Timeout";
    case ErrorCode::kPeerFailure: return "PeerFailure";
    case ErrorCode::kInternal: return "Internal";
  }
  return "UnknownError";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error("tpgemm " + std::string(to_string(code)) + ": " + message), code_(code), message_(message) {}

void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

}  // namespace tpgemm
