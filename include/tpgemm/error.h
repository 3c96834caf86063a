// tpgemm errors: one exception type with a code, and a non-throwing Status for can_implement().
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tpgemm {

enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument,  // a value the caller passed is out of range, null, misaligned or inconsistent
  kUnsupported,      // valid, but this implementation / dtype / layout / topology cannot run it
  kCudaError,        // a CUDA runtime or cuBLASLt call failed
  kNcclError,        // an NCCL call failed
  kTimeout,          // a bounded wait for a peer (device flag or host rendezvous) ran out
  kPeerFailure,      // another rank rejected the same collective call; this rank stops too
  kInternal,         // a broken invariant inside tpgemm: a bug, please report it
};

std::string_view to_string(ErrorCode code);

// The result of a check that did not throw. `message` names the argument, the value and
// what was expected, so it can be shown to a user as it is.
struct Status {
  ErrorCode code = ErrorCode::kOk;
  std::string message;

  bool ok() const { return code == ErrorCode::kOk; }
  static Status Ok() { return {}; }
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  explicit Error(const Status& status) : Error(status.code, status.message) {}
  ErrorCode code() const { return code_; }
  // The message without the "tpgemm <Code>: " prefix that what() carries.
  const std::string& message() const { return message_; }
  Status status() const { return {code_, message_}; }

 private:
  ErrorCode code_;
  std::string message_;
};

// Throws Error(status) unless status is ok.
void throw_if_error(const Status& status);

}  // namespace tpgemm
