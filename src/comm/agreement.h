// How the ranks of a team agree on the host, while plans and teams are built: all-gathers of
// small blobs, verdicts, barriers. Pure host logic over a transport that moves the bytes (NCCL in
// a Team, threads in the CPU tests).
//
// NOTE [agreement]
// A plan's constructor nests collective steps: one agree_local() around all of it and, inside,
// the implementation's own agree_local()s, all-gathers and symmetric allocations (NOTE
// [collective construction]). A rank that fails between two steps goes straight to the
// outermost agree while its peers are still at an inner step, so steps of different kinds meet.
// Every exchange therefore carries each rank's verdict in a header beside the payload: a step
// that meets a failed rank throws on every rank at once, as an AgreedError, and an enclosing
// agree_local() passes an AgreedError on without exchanging again (every peer threw it too, and
// none will join another exchange). Before, an inner step read the failed rank's message as its
// payload, and the peers went on to a step that the failed rank never joined: a hang.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tpgemm/error.h"

namespace tpgemm::comm {

// An error every rank of the exchange has seen, each rank throwing its own (NOTE [agreement]).
class AgreedError : public Error {
 public:
  using Error::Error;
};

class Agreement {
 public:
  static constexpr size_t kMaxPayload = 1024;  // bytes of one rank's blob
  static constexpr size_t kMessage = 508;      // bytes of a failed rank's message carried in the header
  static constexpr size_t kSlot = 4 + kMessage + kMaxPayload;
  // Collective and synchronous: all[r * slot, (r + 1) * slot) := rank r's `mine` (slot bytes).
  using Transport = std::function<void(const uint8_t* mine, uint8_t* all, size_t slot)>;

  Agreement() = default;
  Agreement(int rank, int world, Transport transport);

  // Every rank's blob of `bytes` (<= kMaxPayload) bytes, by rank. Throws AgreedError
  // (PeerFailure) on every rank if a rank came to it, or to another step, having failed.
  std::vector<std::vector<uint8_t>> allgather(const void* mine, size_t bytes, const char* what);
  // Every rank passes its verdict and a description of what it is about to do; if any verdict
  // is bad, or the descriptions differ, every rank throws an AgreedError (the bad rank its own
  // error, the others PeerFailure naming it; InvalidArgument naming both descriptions).
  void agree(const Status& mine, const std::string& descriptor, const char* what);
  // Runs `work` (local allocations and the like), then agrees on its outcome: a failure on any
  // rank throws on every rank. An AgreedError from inside `work` is passed on as it is.
  void agree_local(const char* what, const std::function<void()>& work);
  void barrier(const char* what);

 private:
  std::vector<std::vector<uint8_t>> exchange(const Status& mine, const void* payload, size_t bytes, const char* what);

  int rank_ = 0;
  int world_ = 1;
  Transport transport_;
};

}  // namespace tpgemm::comm
