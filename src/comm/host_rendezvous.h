// Per-call agreement between the ranks of one machine, through a small shared-memory segment.
//
// NOTE [collective argument check]
// Plan::run() is collective. If one rank's operands are bad and it simply threw, its peers
// would enqueue their half of the collective and wait for it forever (NCCL) or until a
// timeout. So every rank posts its verdict on its own operands here and waits (bounded) for
// everyone's before enqueuing anything: if any rank's operands are bad, all ranks throw in
// the same call, and nothing that touches the caller's memory is enqueued anywhere. Each rank
// also posts which plan it is running, so ranks in different calls all throw too; and each call
// is decided once, go or abort, by the first rank able to (Segment::decided), so that a rank
// arriving just as a peer gives up cannot pass alone. This costs a few microseconds of host
// time per call; an implementation may overlap it with a prologue that writes only its own
// buffers (OpImpl::prologue: the matmul of gemm_oneshot / gemm_twoshot). Ranks on different
// hosts have no such segment; there the check is local (documented in the README).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tpgemm/error.h"

namespace tpgemm::comm {

class HostRendezvous {
 public:
  // Rank 0 creates the segment (create = true) before the others open it (create = false).
  HostRendezvous(const std::string& name, int rank, int world, bool create);
  ~HostRendezvous();
  HostRendezvous(const HostRendezvous&) = delete;
  HostRendezvous& operator=(const HostRendezvous&) = delete;

  // Removes the name once every rank has opened it (the mapping lives on).
  void unlink();

  // Posts `mine` and waits until every rank has posted its verdict for this call. `tag` (the
  // plan's id) and `what` (its first 47 characters: e.g. the call's M) say which collective call
  // this is; ranks that post different ones, or different verdicts, all throw: InvalidArgument
  // naming both calls; this rank's own error if `mine` is
  // bad, else Error(PeerFailure) naming the first bad rank and its message. Error(Timeout) if a
  // rank does not arrive within timeout_ms (and PeerFailure on every rank that comes later).
  void agree(const Status& mine, const char* what, uint64_t tag, int64_t timeout_ms);
  // Whether a rank gave up on a call (a timeout), as this rank saw it (its own timeout, a peer's
  // abort of this call, or an earlier one's): every later agree() throws, the team is done.
  bool given_up() const;

  // NOTE [peer whereabouts]
  // A rank that gives up waiting for its peers on the host (an agreement's exchange and the
  // planner's timed calls, TeamState::wait_for_peers; a call's rendezvous, agree above) says which
  // peer held it up and what that peer was doing: every rank posts here its process and the wait
  // for its peers it is in (what, since when), and the one that gives up reads the others'. A peer
  // whose process has exited, one waiting for something else (it made another call), and one in
  // no wait (still busy, or stopped outside tpgemm) each read differently.
  void begin_wait(const char* what);
  void end_wait();
  // "rank 1 (pid 4242) has waited 300012 ms for <what>; rank 2 (pid 4243) has exited": every rank
  // but this one.
  std::string whereabouts() const;

  static std::string unique_name();  // "/tpgemm-<pid>-<random>"

 private:
  struct Segment;
  std::string name_;
  int rank_;
  int world_;
  Segment* seg_ = nullptr;
  size_t bytes_ = 0;
  uint64_t calls_ = 0;
  bool saw_abort_ = false;  // (set before the error is thrown, whichever rank decided)
};

}  // namespace tpgemm::comm
