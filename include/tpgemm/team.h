// A Team is the set of processes (one per GPU) that run tpgemm's collective GEMMs together.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <memory>

namespace tpgemm {

namespace detail {
struct TeamState;
}

struct TeamOptions {
  // Bound on every wait for a peer on the GPU (flags, barriers). Without a host rendezvous before
  // the call (call_check kLocal, the default, and every replay of a CUDA graph) such a wait also
  // counts the time the peer's host takes to reach the call, so by default it is the host's
  // bound; where the ranks' hosts stay in step, a few seconds find a lost peer sooner.
  // 0 = TPGEMM_TIMEOUT_MS from the environment, else host_timeout_ms.
  int64_t timeout_ms = 0;
  // Bound on the per-call host rendezvous, which waits for the slowest rank's host to reach
  // the same call (a rank busy with I/O or a slow data loader is not an error).
  // 0 = TPGEMM_HOST_TIMEOUT_MS from the environment, else 300000 ms.
  int64_t host_timeout_ms = 0;
  // The per-call check across ranks (NOTE [collective argument check]).
  //   kLocal       each rank checks its own operands and throws alone if they are bad; no host
  //                waits for another's, so a program's CPU runs ahead of its GPUs. A rank that
  //                throws cannot know whether its peers ran the call, after which its calls would
  //                pair with theirs one off: the team fails on that rank (its later calls refuse),
  //                and its peers fail on their own bounded waits (Timeout naming it; the
  //                baseline's NCCL collectives wait as NCCL does): a bug to find with kCollective.
  //   kCollective  every rank also waits (bounded by host_timeout_ms) for every other's verdict on
  //                the same call: one rank's bad operands throw on all ranks before anything is
  //                enqueued. A few microseconds per call plus the skew between the ranks' hosts.
  //   kDefault     TPGEMM_CALL_CHECK from the environment ("local" or "collective"), else kLocal.
  enum class CallCheck : int { kDefault = 0, kLocal, kCollective };
  CallCheck call_check = CallCheck::kDefault;
};

class Team {
 public:
  // (a) A rank of a group started by tpgemm's own launcher, or anything else that hands out
  //     an ncclUniqueId. `device` is the CUDA device this process uses.
  static Team from_unique_id(const ncclUniqueId& id, int rank, int world_size, int device,
                             const TeamOptions& options = {});

  // (b) The environment torchrun or mpirun set: RANK / WORLD_SIZE / LOCAL_RANK (or the
  //     OMPI_COMM_WORLD_* / SLURM_* equivalents). Rank 0 hands the ncclUniqueId to the others
  //     over TCP at MASTER_ADDR : TPGEMM_BOOTSTRAP_PORT (default MASTER_PORT + 1, because
  //     torchrun's agent already listens on MASTER_PORT).
  static Team from_env(const TeamOptions& options = {});

  // (c) A communicator the caller already has. tpgemm borrows it and never destroys it.
  //     The current CUDA device must be the communicator's device. A team on it that failed
  //     (a Timeout: a peer never joined) cannot abort it: ncclCommAbort it yourself before
  //     destroying the team's plans and the team (their frees would wait for NCCL work that
  //     never ends); the team's own few buffers are left to the process's end.
  static Team from_comm(ncclComm_t comm, const TeamOptions& options = {});

  int rank() const;
  int world_size() const;
  int device() const;
  // Ranks reachable by NVLink load/store (NCCL's LSA team) from this rank, itself included.
  int lsa_size() const;
  // True when every rank is an LSA peer: the symmetric-memory implementations need it.
  bool all_lsa_peers() const;
  ncclComm_t comm() const;

  // Throws the error a bounded device wait recorded (Timeout, naming who waited on whom) or
  // an asynchronous NCCL error. It does not synchronise: call it after synchronising the
  // stream you ran on. Once a wait has failed the team stays failed; make a new one.
  void check() const;

  // A barrier of all ranks' hosts (an NCCL all-gather on a stream of the team's own; it does
  // not wait for work on your streams).
  void barrier() const;

  // (a moved-from Team throws InvalidArgument)
  const std::shared_ptr<detail::TeamState>& state() const;

 private:
  explicit Team(std::shared_ptr<detail::TeamState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::TeamState> state_;
};

}  // namespace tpgemm
