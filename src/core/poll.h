// Polling a condition on the host up to a deadline: the bounded form of every host wait that
// has no blocking call to wait in (a stream's work, a non-blocking NCCL communicator's state).
#pragma once

#include <chrono>
#include <thread>

namespace tpgemm {

// Calls `done` until it returns true (then true) or `deadline` has passed (then false). The
// first polls run back to back, for the waits that end within tens of microseconds; later ones
// are 50 us apart, so that a long wait does not hold a core.
template <class Done>
bool poll_until(std::chrono::steady_clock::time_point deadline, Done&& done) {
  for (int polls = 0;; ++polls) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace tpgemm
