#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device/core.h>  // ncclTeamLsa(): the host side of the device API
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "comm/bootstrap.h"
#include "comm/team_state.h"
#include "core/check.h"
#include "core/env.h"
#include "core/poll.h"
#include "gemm/sm90_gemm.h"
#include "tpgemm/team.h"

namespace tpgemm {
namespace detail {
namespace {

// Ranks that can share the per-call rendezvous segment: the same machine (boot id) and the same
// IPC namespace and /dev/shm (containers on one host can share a hostname and not those).
std::string host_identity() {
  char host[256] = {}, ipc[128] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  const ssize_t n = ::readlink("/proc/self/ns/ipc", ipc, sizeof(ipc) - 1);
  struct stat shm {};
  const bool have_shm = ::stat("/dev/shm", &shm) == 0;
  return strfmt("%s/%s/%s/%llx", host, boot.c_str(), n > 0 ? ipc : "?",
                have_shm ? static_cast<unsigned long long>(shm.st_dev) : 0ull);
}

template <size_t N>
void copy_str(char (&dst)[N], const std::string& s) {
  std::snprintf(dst, N, "%s", s.c_str());
}

// At most 2^40 ms (35 years): the device's wait counts nanoseconds in 64 bits, which a larger
// bound would overflow into a tiny one.
constexpr int64_t kMaxTimeoutMs = int64_t(1) << 40;

// TeamOptions::host_timeout_ms, else TPGEMM_HOST_TIMEOUT_MS, else 300 s (its range is checked
// with the team's other settings, TeamState::init).
int64_t resolve_host_timeout_ms(const TeamOptions& options) {
  return options.host_timeout_ms > 0 ? options.host_timeout_ms
                                     : env_int("TPGEMM_HOST_TIMEOUT_MS", 1, kMaxTimeoutMs).value_or(300000);
}

}  // namespace

TeamState::~TeamState() {
  rendezvous.reset();
  // NOTE [failed team]: after a failed wait a peer may never join a collective teardown, and
  // NCCL work may still be in flight: abort first, so that the frees below do not wait for it.
  const bool abort = owns_comm && comm != nullptr && has_failed();
  if (abort) ncclCommAbort(comm);
  // A failed team on a borrowed communicator (not aborted: the caller's, who should abort it
  // first) may have work that never ends on the GPU, and every free would wait for it: what the
  // team holds is left to the process's end.
  if (!owns_comm && has_failed()) {
    (void)mailbox.release();
    return;
  }
  mailbox.reset();
  if (lt != nullptr) cublasLtDestroy(lt);
  if (scratch != nullptr) cudaFree(scratch);
  if (host_scratch != nullptr) cudaFreeHost(host_scratch);
  if (internal_stream != nullptr) cudaStreamDestroy(internal_stream);
  if (owns_comm && comm != nullptr && !abort) ncclCommDestroy(comm);
}

Status TeamState::failure() const {
  const Status tripped = mailbox->status();
  if (!tripped.ok()) return tripped;
  if (failed.load()) {
    std::lock_guard<std::mutex> lock(failure_mutex);
    return {first_failure.code, strfmt("rank %d: this team failed earlier and takes no more work (destroy it and "
                                       "create a new one): %s", rank, first_failure.message.c_str())};
  }
  return Status::Ok();
}

void TeamState::mark_failed(const Status& why, bool stop_work) const {
  {
    std::lock_guard<std::mutex> lock(failure_mutex);
    if (first_failure.ok()) first_failure = why;
  }
  failed.store(true);
  if (!stop_work || !owns_comm || aborted.exchange(true) || comm == nullptr) return;
  // Not ncclCommRevoke: it raises the abort flag only for as long as it drains NCCL's own
  // streams, so a kernel on the caller's stream that polls the flag later spins on for good.
  ncclCommAbort(comm);
  comm = nullptr;
}

void TeamState::init(ncclComm_t c, bool owns, const TeamOptions& options) {
  comm = c;
  owns_comm = owns;
  TPGEMM_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  TPGEMM_NCCL_CHECK(ncclCommCount(comm, &world));
  TPGEMM_NCCL_CHECK(ncclCommCuDevice(comm, &device));
  // What can fail on one rank alone is checked before the first exchange and agreed on there, so
  // that no rank throws while its peers wait in an NCCL collective it never joins. The exchange
  // runs on the communicator's device, so a rank that was handed another can still tell them.
  int current = -1;
  TPGEMM_CUDA_CHECK(cudaGetDevice(&current));
  Status local;
  try {
    if (current != device)
      throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: the current CUDA device is %d but the NCCL "
                                                      "communicator's device is %d: call cudaSetDevice(%d) first",
                                                      rank, current, device, device));
    int version = 0;
    TPGEMM_NCCL_CHECK(ncclGetVersion(&version));
    nccl_version = version;
    if (version / 100 != NCCL_VERSION_CODE / 100)
      throw Error(ErrorCode::kUnsupported,
                  strfmt("tpgemm was built with NCCL %d.%d headers but libnccl reports version code %d: NCCL's device "
                         "ABI changes between minor versions, so use a libnccl %d.%d.x", NCCL_MAJOR, NCCL_MINOR,
                         version, NCCL_MAJOR, NCCL_MINOR));
    if (options.timeout_ms < 0 || options.host_timeout_ms < 0 || options.timeout_ms > kMaxTimeoutMs ||
        options.host_timeout_ms > kMaxTimeoutMs)
      throw Error(ErrorCode::kInvalidArgument,
                  strfmt("TeamOptions timeout_ms=%lld host_timeout_ms=%lld: expected 0 (the environment's, else the "
                         "default) or a positive number of milliseconds up to 2^40",
                         (long long)options.timeout_ms, (long long)options.host_timeout_ms));
    host_timeout_ms = resolve_host_timeout_ms(options);
    // NOTE [device bound]: by default the host's. No host rendezvous precedes a call checked
    // locally (the default) or a CUDA graph's replay, so a wait for a peer on the GPU also counts
    // the time its host takes to reach the call (a checkpoint written by one rank, a recompile):
    // the GPU's bound must allow as much as the host's does, or a slow host fails the team.
    timeout_ms = options.timeout_ms > 0 ? options.timeout_ms
                                        : env_int("TPGEMM_TIMEOUT_MS", 1, kMaxTimeoutMs).value_or(host_timeout_ms);
    collective_calls = resolve_call_check(options.call_check) == TeamOptions::CallCheck::kCollective;
    const ncclTeam_t lsa = ncclTeamLsa(comm);
    lsa_size = lsa.nRanks > 0 ? lsa.nRanks : 1;
    all_lsa = lsa_size == world;
    cudaDeviceProp prop{};
    TPGEMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    num_sms = prop.multiProcessorCount;
    fp8 = prop.major * 10 + prop.minor >= 89;
    device_name = prop.name;
    TPGEMM_CUBLAS_CHECK(cublasLtCreate(&lt));
    mailbox = std::make_unique<comm::TimeoutMailbox>();
  } catch (const Error& e) {
    local = e.status();
  } catch (const std::exception& e) {
    local = {ErrorCode::kInternal, strfmt("rank %d, creating the team: %s", rank, e.what())};
  }
  // What the exchange itself needs cannot be agreed on: if these fail here, the peers wait in
  // NCCL's all-gather (NCCL's own bounds, if any, apply).
  if (current != device) TPGEMM_CUDA_CHECK(cudaSetDevice(device));
  TPGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&internal_stream, cudaStreamNonBlocking));
  const size_t staging = comm::Agreement::kSlot * static_cast<size_t>(world + 1);
  TPGEMM_CUDA_CHECK(cudaMalloc(&scratch, staging));
  TPGEMM_CUDA_CHECK(cudaMallocHost(&host_scratch, staging));
  agreement = comm::Agreement(rank, world, [this](const uint8_t* mine, uint8_t* all, size_t slot) {
    // A failed team's communicator is gone (NOTE [failed team]): its first error, not NCCL's
    // complaint about a null communicator (an agreement on a failure that just happened). A
    // borrowed one is not aborted, but its stream holds an exchange that never ended: another
    // would only wait behind it.
    if (comm == nullptr || failed.load()) throw Error(failure());
    const size_t gathered = slot * static_cast<size_t>(world);
    // Both copies go through pinned memory, so that neither blocks the host: the bound is
    // wait_for_peers', whatever the peers do.
    std::memcpy(host_scratch + gathered, mine, slot);
    uint8_t* send = scratch + gathered;
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(send, host_scratch + gathered, slot, cudaMemcpyHostToDevice, internal_stream));
    TPGEMM_NCCL_CHECK(ncclAllGather(send, scratch, slot, ncclUint8, comm, internal_stream));
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(host_scratch, scratch, gathered, cudaMemcpyDeviceToHost, internal_stream));
    wait_for_peers(internal_stream,
                   "its peers to exchange the team's set-up data (a plan, a range of M, a barrier) over NCCL");
    std::memcpy(all, host_scratch, gathered);
  });
  try {
    // The per-call check is part of the protocol: a rank waiting for verdicts a peer never posts
    // would time out on every call, so the ranks must agree on it here.
    agree(local, collective_calls ? "call_check=collective" : "call_check=local", "creating the team");
  } catch (...) {
    if (current != device) cudaSetDevice(current);  // the caller's device, as it was
    throw;
  }
  // What the planner takes from the GPUs, one answer for the whole team, so that every rank's
  // planner has the same candidates and makes the same choice on a team of unlike GPUs (models,
  // or SMs limited by MPS): whether the GEMM core runs on all, FP8 on all, the fewest SMs.
  struct {
    int32_t sms;
    uint8_t sm90, fp8;
  } mine{num_sms, static_cast<uint8_t>(gemm::Sm90Gemm::device_supported(device).ok() ? 1 : 0),
         static_cast<uint8_t>(fp8 ? 1 : 0)}, theirs{};
  all_sm90 = true;
  for (const auto& blob : allgather(&mine, sizeof(mine), "the GPUs' kinds and SM counts")) {
    std::memcpy(&theirs, blob.data(), sizeof(theirs));
    all_sm90 = all_sm90 && theirs.sm90 == 1;
    fp8 = fp8 && theirs.fp8 == 1;
    num_sms = std::min(num_sms, static_cast<int>(theirs.sms));
  }

  // A shared-memory rendezvous when every rank runs on this host (NOTE [collective argument check]).
  const std::string me = host_identity();
  bool same_host = true;
  for (const auto& blob : allgather(me.c_str(), me.size() + 1, "whether every rank is on this host"))
    same_host = same_host && std::strcmp(reinterpret_cast<const char*>(blob.data()), me.c_str()) == 0;
  if (same_host && world > 1) {
    char name[128] = {};
    Status created;
    if (rank == 0) {
      copy_str(name, comm::HostRendezvous::unique_name());
      try {
        rendezvous = std::make_unique<comm::HostRendezvous>(name, rank, world, true);
      } catch (const Error& e) {
        created = e.status();
      }
    }
    agree(created, "", "creating the host rendezvous segment");
    std::memcpy(name, allgather(name, sizeof(name), "the host rendezvous segment's name")[0].data(), sizeof(name));
    Status opened;
    if (rank != 0) {
      try {
        rendezvous = std::make_unique<comm::HostRendezvous>(name, rank, world, false);
      } catch (const Error& e) {
        opened = e.status();
      }
    }
    try {
      agree(opened, "", "opening the host rendezvous segment");
    } catch (...) {
      if (rank == 0) rendezvous->unlink();  // leave nothing behind in /dev/shm
      throw;
    }
    if (rank == 0) rendezvous->unlink();
  }
}

void TeamState::check() const {
  const Status tripped = mailbox->status();
  if (!tripped.ok()) mark_failed(tripped);  // the caller's synchronous check: stop the stuck work now
  throw_if_error(failure());
  ncclResult_t async = ncclSuccess;
  TPGEMM_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
  if (async != ncclSuccess && async != ncclInProgress)
    throw Error(ErrorCode::kNcclError, strfmt("rank %d: NCCL reported an asynchronous error: %s (%s)", rank,
                                              ncclGetErrorString(async), ncclGetLastError(comm)));
}

Status TeamState::check_device_memory(const char* name, const void* p, const void*& known) const {
  if (p == nullptr || p == known) return Status::Ok();
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) cudaGetLastError();  // not a pointer CUDA knows: clear the error, say so below
  const bool ours = attr.type == cudaMemoryTypeManaged || (attr.type == cudaMemoryTypeDevice && attr.device == device);
  if (e == cudaSuccess && ours) {
    known = p;
    return Status::Ok();
  }
  const std::string what = e != cudaSuccess || attr.type == cudaMemoryTypeUnregistered ? std::string("host memory")
                           : attr.type == cudaMemoryTypeHost                        ? std::string("pinned host memory")
                                                                : strfmt("memory of device %d", attr.device);
  return {ErrorCode::kInvalidArgument, strfmt("%s=%p is %s: expected memory of this rank's GPU (device %d)", name, p,
                                              what.c_str(), device)};
}

void TeamState::zero_now(void* p, size_t bytes) const {
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, internal_stream));
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(internal_stream));
}

void TeamState::wait_for_peers(cudaStream_t stream, const char* what) const {
  const auto start = std::chrono::steady_clock::now();
  cudaError_t e = cudaErrorNotReady;
  if (rendezvous != nullptr) rendezvous->begin_wait(what);  // NOTE [peer whereabouts]
  const bool done = poll_until(start + std::chrono::milliseconds(host_timeout_ms), [&] {
    e = cudaStreamQuery(stream);
    return e != cudaErrorNotReady;
  });
  const std::string where = rendezvous == nullptr ? std::string("the ranks span several hosts: no word of them here")
                            : done                ? std::string()
                                                  : rendezvous->whereabouts();
  if (rendezvous != nullptr) rendezvous->end_wait();
  if (done) {
    TPGEMM_CUDA_CHECK(e);
    return;
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  const Status why{ErrorCode::kTimeout,
                   strfmt("rank %d waited %lld ms for %s: a peer never joined (it crashed, stopped early, or made a "
                          "different tpgemm call). Where the others are: %s. TPGEMM_HOST_TIMEOUT_MS bounds this wait. "
                          "This team is now unusable: destroy it and create a new one.",
                          rank, (long long)waited.count(), what, where.c_str())};
  mark_failed(why);  // the stream's collective work never ends (NOTE [failed team])
  throw Error(why);
}

namespace {

// rendezvous.agree(); where a rank gave up on it (a timeout: the segment is done for), the team
// is marked failed, so that its communicator is aborted and its teardown does not wait for work
// a peer never joined.
void rendezvous_agree(const TeamState& t, const Status& mine, const char* what, uint64_t plan) {
  try {
    t.rendezvous->agree(mine, what, plan, t.host_timeout_ms);
  } catch (const Error& e) {
    if (t.rendezvous->given_up()) t.mark_failed(e.status());
    throw;
  }
}

}  // namespace

void TeamState::agree_call(const Status& mine, const char* what, uint64_t plan) {
  if (collective_calls && rendezvous != nullptr) return rendezvous_agree(*this, mine, what, plan);
  if (mine.ok()) return;
  // NOTE [refused alone]: checked locally, this rank's refusal enqueued nothing, and it cannot
  // know whether its peers ran the call. Ranks pair their calls by count alone (every flag, epoch
  // and NCCL collective, the team's own exchanges too), so this rank's next call would pair with
  // their last: a silent mix of two steps' data. The team fails here instead: this rank's later
  // calls refuse, and its peers' waits for it end in a Timeout naming it. Its work so far is valid
  // and paired: it is left to finish (the communicator is aborted only at teardown).
  if (world > 1 && failure().ok())
    mark_failed({mine.code, strfmt("rank %d: %s refused a call on this rank, checked locally (%s); it cannot know "
                                   "whether its peers ran it, so its later calls could pair with theirs one off: "
                                   "make a new team (call_check collective refuses a bad call on every rank, and "
                                   "the team stays usable)",
                                   rank, what, mine.message.c_str())},
                /*stop_work=*/false);
  throw Error(mine);
}

void TeamState::agree_step(const Status& mine, const std::string& what, uint64_t plan, const char* step) {
  if (rendezvous != nullptr) rendezvous_agree(*this, mine, what.c_str(), plan);
  else agree(mine, what, step);
}

Status TeamState::check_stream(cudaStream_t stream, bool* capturing) const {
  // Capture forbids cudaStreamGetDevice on a capturing stream (and is then invalidated), but
  // not the query of its status: a captured call's stream is left to the capture, where a launch
  // on another GPU's stream fails before any replay.
  if (!query_capturing(stream, capturing).ok())
    cudaGetLastError();  // (not sticky: cleared; a bad handle is refused below, with its error)
  else if (*capturing)
    return Status::Ok();
  int owner = -1;
  if (const cudaError_t e = cudaStreamGetDevice(stream, &owner); e != cudaSuccess) {
    cudaGetLastError();  // (not sticky: clear it)
    return {ErrorCode::kInvalidArgument,
            strfmt("rank %d: stream %p is not a CUDA stream this process can use (%s)", rank, static_cast<void*>(stream),
                   cudaGetErrorString(e))};
  }
  if (owner != device)
    return {ErrorCode::kInvalidArgument,
            strfmt("rank %d: the stream belongs to GPU %d but the team's GPU is %d: pass a stream of GPU %d", rank,
                   owner, device, device)};
  return Status::Ok();
}

TeamOptions::CallCheck resolve_call_check(TeamOptions::CallCheck asked) {
  using CallCheck = TeamOptions::CallCheck;
  if (asked == CallCheck::kLocal || asked == CallCheck::kCollective) return asked;
  if (asked != CallCheck::kDefault)
    throw Error(ErrorCode::kInvalidArgument, strfmt("TeamOptions::call_check=%d: expected kDefault, kLocal or kCollective",
                                                    static_cast<int>(asked)));
  const auto v = env_string("TPGEMM_CALL_CHECK");
  if (!v || v->empty() || *v == "local") return CallCheck::kLocal;
  if (*v == "collective") return CallCheck::kCollective;
  throw Error(ErrorCode::kInvalidArgument,
              strfmt("TPGEMM_CALL_CHECK=%s: expected \"local\" or \"collective\"", v->c_str()));
}

}  // namespace detail

namespace {

void set_device_checked(int device, int rank) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: no CUDA device is usable: %s", rank,
                                                    e != cudaSuccess ? cudaGetErrorString(e) : "none visible"));
  if (device < 0 || device >= count)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: device %d does not exist: %d CUDA device(s) are visible "
                                                    "(check CUDA_VISIBLE_DEVICES and the number of processes per node)",
                                                    rank, device, count));
  TPGEMM_CUDA_CHECK(cudaSetDevice(device));
}

// Polls a non-blocking communicator until its pending work (initialisation, a split, a
// finalisation) is done: ncclSuccess, an error, or ncclInProgress still at `deadline`.
ncclResult_t settle(ncclComm_t comm, std::chrono::steady_clock::time_point deadline) {
  ncclResult_t r = ncclSuccess, state = ncclInProgress;
  poll_until(deadline, [&] {
    r = ncclCommGetAsyncError(comm, &state);
    return r != ncclSuccess || state != ncclInProgress;
  });
  return r != ncclSuccess ? r : state;
}

// NOTE [bounded initialisation]
// NCCL's initialisation waits for every rank, without bound: a rank that died before it, or was
// never started, kept the others in it for good. So it runs non-blocking, polled up to the host
// bound (TeamOptions::host_timeout_ms), and is aborted there with a Timeout. tpgemm's NCCL calls
// expect blocking semantics (a call returns once enqueued), so the team's communicator is then
// split off that one, blocking, while every rank is known to be alive, and the first is released.
ncclComm_t init_comm_bounded(int world, const ncclUniqueId& id, int rank, int64_t timeout_ms) {
  // NCCL_COMM_BLOCKING overrides the configs below: 0 would make the team's communicator
  // non-blocking, which tpgemm's calls do not expect; 1 makes the initialisation blocking again,
  // without the bound (said once, on rank 0).
  if (const auto v = env_string("NCCL_COMM_BLOCKING")) {
    if (*v == "0")
      throw Error(ErrorCode::kInvalidArgument,
                  strfmt("rank %d: NCCL_COMM_BLOCKING=0 would make the team's NCCL communicator non-blocking, which "
                         "tpgemm's calls do not expect; unset it (tpgemm bounds NCCL's initialisation itself)", rank));
    if (rank == 0)
      std::fprintf(stderr, "tpgemm: warning: NCCL_COMM_BLOCKING=%s: NCCL's initialisation blocks, without "
                   "TPGEMM_HOST_TIMEOUT_MS's bound; unset it to have the bound\n", v->c_str());
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  ncclConfig_t nonblocking = NCCL_CONFIG_INITIALIZER;
  nonblocking.blocking = 0;
  ncclComm_t first = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&first, world, id, rank, &nonblocking);
  if (r == ncclSuccess || r == ncclInProgress) r = settle(first, deadline);
  if (r == ncclInProgress) {
    ncclCommAbort(first);
    throw Error(ErrorCode::kTimeout,
                strfmt("rank %d waited %lld ms in NCCL's initialisation for the other %d rank(s): one never joined (it "
                       "crashed, stopped early, or was never started). TPGEMM_HOST_TIMEOUT_MS bounds this wait.",
                       rank, (long long)timeout_ms, world - 1));
  }
  if (r != ncclSuccess) {
    if (first != nullptr) ncclCommAbort(first);
    throw Error(ErrorCode::kNcclError, strfmt("rank %d: NCCL's initialisation failed: %s", rank, ncclGetErrorString(r)));
  }
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 1;
  blocking.splitShare = 0;  // its own resources: releasing the first one leaves it whole
  ncclComm_t comm = nullptr;
  // (a bound of its own: every rank is known to have joined, so this is NCCL's own time)
  const auto split_deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // A split off a non-blocking communicator runs as the parent's pending work: NCCL returns
  // ncclSuccess as soon as it is queued, and writes `comm` from its own thread when it ends. So
  // the parent is polled whatever the split returned, and `comm` read only after that.
  r = ncclCommSplit(first, 0, rank, &comm, &blocking);
  if (r == ncclSuccess || r == ncclInProgress) r = settle(first, split_deadline);
  ncclComm_t made = __atomic_load_n(&comm, __ATOMIC_ACQUIRE);
  if (r == ncclSuccess && made == nullptr) r = ncclInternalError;
  if (r == ncclSuccess) r = settle(made, split_deadline);
  if (r != ncclSuccess) {
    ncclCommAbort(first);  // first: it waits for the split's job, which writes comm
    made = __atomic_load_n(&comm, __ATOMIC_ACQUIRE);
    if (made != nullptr) ncclCommAbort(made);
    throw Error(r == ncclInProgress ? ErrorCode::kTimeout : ErrorCode::kNcclError,
                strfmt("rank %d: making the team's communicator after NCCL's initialisation: %s", rank,
                       r == ncclInProgress ? "a peer never joined within TPGEMM_HOST_TIMEOUT_MS" : ncclGetErrorString(r)));
  }
  // The first communicator is done with: released locally (destroying a non-blocking
  // communicator runs synchronously, and unlike an abort it raises no flag a shared resource
  // might carry over to the team's).
  ncclCommDestroy(first);
  return made;
}

}  // namespace

Team Team::from_unique_id(const ncclUniqueId& id, int rank, int world_size, int device, const TeamOptions& options) {
  if (world_size < 1 || rank < 0 || rank >= world_size)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d of world size %d: expected 0 <= rank < world size", rank, world_size));
  set_device_checked(device, rank);
  // (an out-of-range option or a malformed TPGEMM_HOST_TIMEOUT_MS is refused by TeamState::init,
  // agreed across ranks; until then capped, or the default: a throw here would be this rank's alone)
  int64_t host_timeout_ms = 300000;
  try {
    host_timeout_ms = std::min(detail::resolve_host_timeout_ms(options), detail::kMaxTimeoutMs);
  } catch (const Error&) {
  }
  ncclComm_t comm = init_comm_bounded(world_size, id, rank, host_timeout_ms);
  auto s = std::make_shared<detail::TeamState>();
  s->init(comm, true, options);  // on failure ~TeamState destroys the communicator
  return Team(std::move(s));
}

Team Team::from_env(const TeamOptions& options) {
  const auto env = comm::read_launch_env();
  comm::LaunchEnv e = env.value_or(comm::LaunchEnv{});
  ncclUniqueId id{};
  int64_t bootstrap_ms = 120000;
  // This rank's settings and device are checked before the exchange, which tells every rank if
  // one failed (NOTE [unique-id exchange]): then none of them enters NCCL's initialisation.
  Status fit;
  try {
    bootstrap_ms = env_int("TPGEMM_BOOTSTRAP_TIMEOUT_MS", 1, int64_t(1) << 40).value_or(bootstrap_ms);
    detail::resolve_host_timeout_ms(options);  // (a malformed TPGEMM_HOST_TIMEOUT_MS: every rank hears of it)
    set_device_checked(e.local_rank, e.rank);
    if (e.rank == 0) TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
  } catch (const Error& err) {
    fit = err.status();
  }
  std::vector<uint8_t> mine(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof(id));
  const auto got = comm::tcp_broadcast(e, mine, sizeof(id), bootstrap_ms, fit);
  std::memcpy(&id, got.data(), sizeof(id));
  return from_unique_id(id, e.rank, e.world, e.local_rank, options);
}

Team Team::from_comm(ncclComm_t comm, const TeamOptions& options) {
  if (comm == nullptr) throw Error(ErrorCode::kInvalidArgument, "from_comm: the communicator is null");
  auto s = std::make_shared<detail::TeamState>();
  s->init(comm, false, options);
  return Team(std::move(s));
}

const std::shared_ptr<detail::TeamState>& Team::state() const {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "a moved-from Team");
  return state_;
}

int Team::rank() const { return state()->rank; }
int Team::world_size() const { return state()->world; }
int Team::device() const { return state()->device; }
int Team::lsa_size() const { return state()->lsa_size; }
bool Team::all_lsa_peers() const { return state()->all_lsa; }
ncclComm_t Team::comm() const { return state()->comm; }
void Team::check() const { state()->check(); }
void Team::barrier() const { state()->barrier(); }

}  // namespace tpgemm
