#include "comm/host_rendezvous.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "core/format.h"

namespace tpgemm::comm {

// One cache line set per rank; verdicts double-buffered by call parity, because a fast rank
// may post call n + 1 while a slow one is still reading call n (it cannot post n + 2 before
// the slow one has arrived at n + 1).
struct alignas(64) RankSlot {
  std::atomic<uint64_t> arrived;  // the last call this rank posted
  int32_t code[2];
  uint64_t tag[2];  // which collective call: the plan's id (ranks in different calls must not pass)
  char what[2][48];
  char message[2][244];
  char gave_up[244];  // why this rank gave up on a call: written before it decides the call kAbort
  // NOTE [peer whereabouts]: this rank's process (its pid, checked only from the same pid
  // namespace), and the wait it is in (since: steady-clock ms, system-wide; 0 in none) or was last.
  int32_t pid;
  uint64_t pid_namespace;
  std::atomic<int64_t> waiting_since_ms;
  char waiting_for[160];
};
struct HostRendezvous::Segment {
  uint64_t magic;
  int32_t world;
  // How the latest call was decided, once, by the first rank to decide it: (call << 16) |
  // (rank << 2) | kGo or kAbort. Every rank follows that decision, so a rank arriving just as a
  // peer gives up cannot pass alone.
  std::atomic<uint64_t> decided;
  // Set once a rank gave up waiting: every later agree() on any rank throws, so that a rank
  // arriving late never enqueues a collective its peers have abandoned.
  std::atomic<int32_t> failed;
  char failure[244];
  RankSlot slots[1];  // world of them
};

namespace {
constexpr uint64_t kMagic = 0x7470676d72647633ull;  // "tpgmrdv3"
constexpr uint64_t kGo = 1, kAbort = 2;
static_assert(std::atomic<uint64_t>::is_always_lock_free, "cross-process atomics need lock-free 64-bit atomics");

int64_t steady_now_ms() {  // CLOCK_MONOTONIC: one clock for every process of the machine
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Whether process `pid` (of this pid namespace) has exited: gone, or a zombie its parent has not
// reaped yet.
bool exited(int32_t pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  char state = 0;
  std::ifstream stat(strfmt("/proc/%d/stat", pid));
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');  // "pid (comm) S ...": comm may hold spaces and parentheses
  if (paren != std::string::npos && paren + 2 < line.size()) state = line[paren + 2];
  return state == 'Z' || state == 'X';
}

uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}
}  // namespace

HostRendezvous::HostRendezvous(const std::string& name, int rank, int world, bool create)
    : name_(name), rank_(rank), world_(world) {
  bytes_ = sizeof(Segment) + sizeof(RankSlot) * static_cast<size_t>(world);
  const int fd = ::shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: shm_open(%s): %s (the ranks of one team must share /dev/shm)",
                                                    rank, name.c_str(), std::strerror(errno)));
  // The creator leaves no name behind in /dev/shm if it fails after creating it.
  auto fail = [&](const char* call) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    if (create) ::shm_unlink(name.c_str());
    return Error(ErrorCode::kInvalidArgument, strfmt("rank %d: %s(%s): %s", rank, call, name.c_str(), why.c_str()));
  };
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) throw fail("ftruncate");
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw fail("mmap");
  ::close(fd);
  seg_ = static_cast<Segment*>(p);
  if (create) {
    std::memset(p, 0, bytes_);  // ftruncate zero-fills too; this is for clarity
    seg_->world = world;
    std::atomic_thread_fence(std::memory_order_release);
    seg_->magic = kMagic;
  }
  RankSlot& me = seg_->slots[rank];
  me.pid = static_cast<int32_t>(::getpid());
  me.pid_namespace = pid_namespace();
}

void HostRendezvous::begin_wait(const char* what) {
  RankSlot& me = seg_->slots[rank_];
  std::snprintf(me.waiting_for, sizeof(me.waiting_for), "%s", what);
  me.waiting_since_ms.store(std::max<int64_t>(steady_now_ms(), 1), std::memory_order_release);
}

void HostRendezvous::end_wait() { seg_->slots[rank_].waiting_since_ms.store(0, std::memory_order_release); }

std::string HostRendezvous::whereabouts() const {
  const int64_t now = steady_now_ms();
  const uint64_t my_namespace = pid_namespace();
  std::string out;
  for (int q = 0; q < world_; ++q) {
    if (q == rank_) continue;
    const RankSlot& s = seg_->slots[q];
    const int64_t since = s.waiting_since_ms.load(std::memory_order_acquire);
    const std::string what(s.waiting_for, strnlen(s.waiting_for, sizeof(s.waiting_for)));  // a diagnostic: racy is fine
    std::string where;
    if (s.pid == 0)
      where = strfmt("rank %d never opened the team's segment", q);
    else if (s.pid_namespace == my_namespace && exited(s.pid))
      where = strfmt("rank %d (pid %d) has exited", q, s.pid);
    else if (since > 0)
      where = strfmt("rank %d (pid %d) has waited %lld ms for %s", q, s.pid, (long long)(now - since), what.c_str());
    else
      where = strfmt("rank %d (pid %d) is in no wait for its peers%s", q, s.pid,
                     what.empty() ? "" : (" (its last: for " + what + ")").c_str());
    out += (out.empty() ? "" : "; ") + where;
  }
  return out;
}

HostRendezvous::~HostRendezvous() {
  if (seg_ != nullptr) ::munmap(seg_, bytes_);
}

void HostRendezvous::unlink() { ::shm_unlink(name_.c_str()); }

std::string HostRendezvous::unique_name() {
  std::random_device rd;
  return strfmt("/tpgemm-%d-%08x", static_cast<int>(::getpid()), rd());
}

namespace {

// Decides call `call` as `want` unless it is decided already; returns the decision (kGo or
// kAbort) and, through `by`, the rank that made it. A decision of a later call means this one
// went ahead: no rank passes a call that was not decided kGo.
uint64_t decide(std::atomic<uint64_t>& decided, uint64_t call, int rank, uint64_t want, int* by) {
  uint64_t v = decided.load(std::memory_order_acquire);
  for (;;) {
    if ((v >> 16) > call) return *by = -1, kGo;
    if ((v >> 16) == call) return *by = static_cast<int>((v >> 2) & 0x3fff), v & 3;
    if (decided.compare_exchange_weak(v, (call << 16) | (static_cast<uint64_t>(rank) << 2) | want,
                                      std::memory_order_acq_rel, std::memory_order_acquire))
      return *by = rank, want;
  }
}

}  // namespace

bool HostRendezvous::given_up() const { return saw_abort_ || seg_->failed.load(std::memory_order_acquire) != 0; }

void HostRendezvous::agree(const Status& mine, const char* what, uint64_t tag, int64_t timeout_ms) {
  if (seg_->magic != kMagic || seg_->world != world_)
    throw Error(ErrorCode::kInternal, strfmt("rank %d: the rendezvous segment %s is not initialised", rank_, name_.c_str()));
  auto abandoned = [&] {
    saw_abort_ = true;
    return Error(ErrorCode::kPeerFailure, strfmt("rank %d: the team gave up on an earlier collective call: %s", rank_,
                                                 seg_->failure));
  };
  // Rank `decider` decided this call kAbort; its reason is in its slot, written before that decision
  // and published by it (decide() reads the decision with acquire).
  auto follow_abort = [&](int decider) {
    saw_abort_ = true;
    return Error(ErrorCode::kPeerFailure, strfmt("rank %d: the team gave up on collective call #%llu (%s): %s", rank_,
                                                 (unsigned long long)calls_, what, seg_->slots[decider].gave_up));
  };
  if (seg_->failed.load(std::memory_order_acquire) != 0) throw abandoned();
  const uint64_t call = ++calls_;
  const int parity = static_cast<int>(call & 1);
  RankSlot& me = seg_->slots[rank_];
  me.code[parity] = static_cast<int32_t>(mine.code);
  me.tag[parity] = tag;
  std::snprintf(me.what[parity], sizeof(me.what[parity]), "%s", what);
  std::snprintf(me.message[parity], sizeof(me.message[parity]), "%s", mine.message.c_str());
  me.arrived.store(call, std::memory_order_release);

  const auto t0 = std::chrono::steady_clock::now();
  struct EndWait {  // however this call ends, it is in no wait any more (NOTE [peer whereabouts])
    HostRendezvous* r;
    ~EndWait() { r->end_wait(); }
  } end_wait_on_exit{this};
  int by = -1;
  for (int q = 0; q < world_; ++q) {
    int spins = 0;
    while (seg_->slots[q].arrived.load(std::memory_order_acquire) < call) {
      if (++spins < 1000) continue;
      if (spins == 1000) begin_wait(strfmt("collective call #%llu (%s)", (unsigned long long)call, what).c_str());
      if (seg_->failed.load(std::memory_order_acquire) != 0) throw abandoned();
      const auto waited = std::chrono::steady_clock::now() - t0;
      if (waited > std::chrono::milliseconds(timeout_ms)) {
        const std::string why =
            strfmt("rank %d waited %lld ms for rank %d to reach collective call #%llu (%s); rank %d is still at call "
                   "#%llu. Every rank must make the same tpgemm calls in the same order. Where the others are: %s.",
                   rank_, (long long)timeout_ms, q, (unsigned long long)call, what, q,
                   (unsigned long long)seg_->slots[q].arrived.load(), whereabouts().c_str());
        std::snprintf(me.gave_up, sizeof(me.gave_up), "%s", why.c_str());
        if (decide(seg_->decided, call, rank_, kAbort, &by) == kGo) break;  // rank q came just in time
        if (by != rank_) throw follow_abort(by);
        std::snprintf(seg_->failure, sizeof(seg_->failure), "%s", why.c_str());
        seg_->failed.store(1, std::memory_order_release);
        saw_abort_ = true;
        throw Error(ErrorCode::kTimeout, why);
      }
      // Spin briefly (ranks usually arrive within microseconds), then back off so that a rank
      // waiting for a slow peer's host does not burn a core.
      if (waited > std::chrono::milliseconds(1)) std::this_thread::sleep_for(std::chrono::microseconds(20));
      else std::this_thread::yield();
    }
  }
  if (decide(seg_->decided, call, rank_, kGo, &by) != kGo) throw follow_abort(by);  // a peer gave up first
  // Every rank must be in the same collective call: the same plan's run.
  for (int q = 1; q < world_; ++q) {
    const RankSlot &s0 = seg_->slots[0], &s = seg_->slots[q];
    if (s.tag[parity] != s0.tag[parity] || std::strncmp(s.what[parity], s0.what[parity], sizeof(s.what[parity])) != 0)
      throw Error(ErrorCode::kInvalidArgument,
                  strfmt("ranks are in different collective calls: rank 0 in %s of plan #%llu, rank %d in %s of plan "
                         "#%llu (call #%llu). Every rank must make the same tpgemm calls in the same order.",
                         s0.what[parity], (unsigned long long)s0.tag[parity], q, s.what[parity],
                         (unsigned long long)s.tag[parity], (unsigned long long)call));
  }
  if (!mine.ok()) throw Error(mine);
  for (int q = 0; q < world_; ++q) {
    const RankSlot& s = seg_->slots[q];
    if (s.code[parity] != 0)
      throw Error(ErrorCode::kPeerFailure,
                  strfmt("rank %d rejected collective call #%llu (%s), so rank %d stops too: %s %s", q,
                         (unsigned long long)call, what, rank_,
                         std::string(to_string(static_cast<ErrorCode>(s.code[parity]))).c_str(), s.message[parity]));
  }
}

}  // namespace tpgemm::comm
