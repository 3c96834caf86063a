// What a Team holds. Internal: plans and buffers reach it through Team::state().
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/agreement.h"
#include "comm/device/wait_env.h"
#include "comm/host_rendezvous.h"
#include "comm/timeout.h"
#include "plan/allreduce_timings.h"
#include "tpgemm/error.h"
#include "tpgemm/team.h"

namespace tpgemm::detail {

struct TeamState {
  mutable ncclComm_t comm = nullptr;  // (null after an abort of a failed team: NOTE [failed team])
  bool owns_comm = false;
  int rank = 0;
  int world = 1;
  int device = 0;
  int lsa_size = 1;
  bool all_lsa = false;
  bool all_sm90 = false;  // every rank's GPU is sm_90 (Hopper): tpgemm's GEMM core runs on all of them
  int num_sms = 0;    // the fewest of the team's GPUs (the planner's, and every kernel's grid)
  bool fp8 = false;  // every rank's GPU has FP8 tensor cores (compute capability 8.9 or newer)
  std::string device_name;  // cudaDeviceProp::name (the planner's tuning cache keys by it)
  int nccl_version = 0;     // of the libnccl in this process (ncclGetVersion)
  int64_t timeout_ms = 5000;        // device waits
  int64_t host_timeout_ms = 300000;  // the per-call host rendezvous, and the agreement's exchanges
  bool collective_calls = false;      // TeamOptions::CallCheck::kCollective: every call meets the others
  cublasLtHandle_t lt = nullptr;
  cudaStream_t internal_stream = nullptr;  // team-internal collectives (plan creation, barriers)
  uint8_t* scratch = nullptr;              // device staging for those collectives
  // Pinned host staging for them: a copy into pageable memory returns only once it is done, so
  // it would wait, unbounded, for an all-gather a dead peer never joins (NOTE [failed team]).
  uint8_t* host_scratch = nullptr;
  std::unique_ptr<comm::TimeoutMailbox> mailbox;
  std::unique_ptr<comm::HostRendezvous> rendezvous;  // null when the ranks span several hosts
  comm::Agreement agreement;  // plan and team set-up (NOTE [agreement]), over NCCL on internal_stream

  TeamState() = default;
  TeamState(const TeamState&) = delete;
  TeamState& operator=(const TeamState&) = delete;
  ~TeamState();

  // Fills everything from an initialised communicator (collective).
  void init(ncclComm_t c, bool owns, const TeamOptions& options);

  comm::WaitEnv wait_env() const { return mailbox->env(rank, timeout_ms); }
  void check() const;

  // Collective and synchronous (comm::Agreement): every rank's blob of `bytes` bytes, by rank.
  std::vector<std::vector<uint8_t>> allgather(const void* mine, size_t bytes, const char* what) {
    return agreement.allgather(mine, bytes, what);
  }

  // Collective and synchronous. Every rank passes its own verdict and a description of what
  // it is about to do; if the descriptions differ, or any verdict is bad, every rank throws
  // (the bad rank its own error, the others PeerFailure naming it).
  void agree(const Status& mine, const std::string& descriptor, const char* what) {
    agreement.agree(mine, descriptor, what);
  }

  // Runs `work` (local allocations and the like), then agrees on its outcome: a failure on any
  // rank throws on every rank. NOTE [collective construction]: a plan's constructor does all
  // its local work under one agree_local() before any collective step, so that no rank can
  // fail alone while its peers wait inside a collective (and NOTE [agreement], for the rank that
  // fails between two of its steps).
  void agree_local(const char* what, const std::function<void()>& work) { agreement.agree_local(what, work); }

  // The per-call check of NOTE [collective argument check]: `plan` is the calling plan's id. Local
  // (throws `mine` if bad, and marks the team failed: NOTE [refused alone]) unless the team checks
  // calls collectively.
  void agree_call(const Status& mine, const char* what, uint64_t plan);
  // A step every rank takes together (making a range of a plan, an all-reduce's algorithm):
  // through the host rendezvous where there is one, else the team's agreement. A rendezvous some
  // rank gave up on marks the team failed (NOTE [failed team]) before the error is thrown.
  void agree_step(const Status& mine, const std::string& what, uint64_t plan, const char* step);
  // Ok, or InvalidArgument: `stream` is not a stream of the team's GPU (its launches would fail
  // after the peers committed to the call). `*capturing`: whether it is capturing a CUDA graph.
  Status check_stream(cudaStream_t stream, bool* capturing) const;
  // Waits for `stream`'s work, which waits for the peers (the agreement's NCCL all-gather, the
  // planner's timed calls), at most host_timeout_ms: a peer that never joins is a Timeout naming
  // `what` ("rank 0 waited N ms for <what>: ..."), and the team is marked failed, not a hang.
  void wait_for_peers(cudaStream_t stream, const char* what) const;
  // Plans made on this team so far (failed ones too): every rank makes the same ones in the same
  // order, so a plan's number is the same on every rank, and names it in the per-call check.
  uint64_t plans_made = 0;
  // The measured all-reduce's times (NOTE [measured all-reduce]): filled by the plans that time
  // sizes, the same on every rank.
  plan::AllReduceTimings allreduce_timings;

  void barrier() { agreement.barrier("a barrier of the team"); }

  // NOTE [failed team]: once a wait of the team ran out (a peer's host never joined an exchange,
  // or a device wait tripped), NCCL work of this team may never finish, and a cudaFree behind it
  // (any buffer's release) would wait for it for good. mark_failed(why) stops that work where this
  // team owns the communicator: ncclCommAbort at once (its kernels see the abort flag and end;
  // the team's comm is then null, so windows have nothing left to deregister from and later
  // plans and calls refuse with failure()). `why` is the first failure's error, kept for them.
  // `stop_work` false: refused from here on, but this rank's work so far (valid, and paired with
  // its peers') left to finish: NOTE [refused alone]; the communicator is aborted at teardown.
  void mark_failed(const Status& why, bool stop_work = true) const;
  bool has_failed() const { return failed.load() || (mailbox != nullptr && !mailbox->status().ok()); }
  // Ok, or why this team can take no more work: the tripped device wait, or the host wait that
  // ran out (every later plan and call refuses with it). A trip alone leaves the communicator
  // whole, so that the peers, alive but slow, learn it in the next agreement instead of waiting.
  Status failure() const;
  mutable std::atomic<bool> failed{false};
  mutable std::atomic<bool> aborted{false};  // mark_failed aborted the communicator (once)
  mutable std::mutex failure_mutex;
  mutable Status first_failure;  // (under failure_mutex) what mark_failed was told first

  // Ok if `p` (an operand named `name`) is memory this rank's GPU can use as its own: device
  // memory of its device, or managed memory. A host pointer, or another GPU's memory, would
  // fault inside a kernel after every rank agreed to go: a sticky error, and the peers time out.
  // `known` is the operand's pointer last found good, looked up again only when p differs (a plan
  // usually runs on the same buffers call after call); null p is left to the caller's own check.
  Status check_device_memory(const char* name, const void* p, const void*& known) const;

  // Zeroes device memory and returns once it is done, so that any stream's later work, on a
  // non-blocking stream too, sees zeros (counters and flags that kernels start from).
  void zero_now(void* p, size_t bytes) const;
};

// TeamOptions::call_check with kDefault resolved from TPGEMM_CALL_CHECK (throws InvalidArgument
// on any other value than "local" or "collective").
TeamOptions::CallCheck resolve_call_check(TeamOptions::CallCheck asked);

}  // namespace tpgemm::detail
