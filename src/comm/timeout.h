// The host side of NOTE [timeout record]: allocation, and turning a record into an Error.
#pragma once

#include <cstdint>

#include "comm/device/wait_env.h"
#include "tpgemm/error.h"

namespace tpgemm::comm {

class TimeoutMailbox {
 public:
  TimeoutMailbox();  // needs the team's CUDA device to be current
  ~TimeoutMailbox();
  TimeoutMailbox(const TimeoutMailbox&) = delete;
  TimeoutMailbox& operator=(const TimeoutMailbox&) = delete;

  WaitEnv env(int rank, int64_t timeout_ms) const;
  // Error(Timeout) describing the first failed wait, if any; Ok otherwise.
  Status status() const;
  void throw_if_tripped() const { throw_if_error(status()); }

 private:
  void release();
  TimeoutRecord* host_ = nullptr;
  TimeoutRecord* dev_view_ = nullptr;
  int32_t* tripped_ = nullptr;
};

// TeamOptions::timeout_ms for a team whose ranks run in step (tpgemm-bench's, the tests'), where a
// peer lost on the GPU is found in seconds rather than at the host's bound (NOTE [device bound]):
// `asked` where given, the team's own default (0) where TPGEMM_TIMEOUT_MS is set, else 5000 ms.
int64_t in_step_timeout_ms(int64_t asked);

// Test hook: whether TPGEMM_TEST_DROP_SIGNALS_RANK names `rank`. That rank raises no flag and
// sends no data, so its peers' bounded waits must end in Error(Timeout) naming it. Always false
// unless the library was built with TPGEMM_TEST_HOOKS (test builds).
bool test_drops_signals(int rank);
// Test hook: whether TPGEMM_TEST_FAIL_SETUP_RANK names `rank`. That rank throws while setting up a
// symmetric collective, between two of its plan's collective steps, so its peers must stop at
// the next one naming it. Always false unless built with TPGEMM_TEST_HOOKS.
bool test_fails_setup(int rank);
bool test_hooks_compiled();

}  // namespace tpgemm::comm
