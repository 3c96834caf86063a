#include "comm/host_rendezvous.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "core/format.h"

namespace tpgemm::comm {

// One cache line set per rank; verdicts double-buffered by call parity, because a fast rank
// may post call n + 1 while a slow one is still reading call n (it cannot post n + 2 before
// the slow one has arrived at n + 1).
struct alignas(64) RankSlot {
  std::atomic<uint64_t> arrived;  // the last call this rank posted
  int32_t code[2];
  char message[2][244];
};
struct HostRendezvous::Segment {
  uint64_t magic;
  int32_t world;
  // Set once a rank gave up waiting: every later agree() on any rank throws, so that a rank
  // arriving late never enqueues a collective its peers have abandoned.
  std::atomic<int32_t> failed;
  char failure[244];
  RankSlot slots[1];  // world of them
};

namespace {
constexpr uint64_t kMagic = 0x7470676d72647631ull;  // "tpgmrdv1"
static_assert(std::atomic<uint64_t>::is_always_lock_free, "cross-process atomics need lock-free 64-bit atomics");
}  // namespace

HostRendezvous::HostRendezvous(const std::string& name, int rank, int world, bool create)
    : name_(name), rank_(rank), world_(world) {
  bytes_ = sizeof(Segment) + sizeof(RankSlot) * static_cast<size_t>(world);
  const int fd = ::shm_open(name.c_str(), create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: shm_open(%s): %s (the ranks of one team must share /dev/shm)",
                                                    rank, name.c_str(), std::strerror(errno)));
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
    ::close(fd);
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: ftruncate(%s): %s", rank, name.c_str(), std::strerror(errno)));
  }
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: mmap(%s): %s", rank, name.c_str(), std::strerror(errno)));
  seg_ = static_cast<Segment*>(p);
  if (create) {
    std::memset(p, 0, bytes_);  // ftruncate zero-fills too; this is for clarity
    seg_->world = world;
    std::atomic_thread_fence(std::memory_order_release);
    seg_->magic = kMagic;
  }
}

HostRendezvous::~HostRendezvous() {
  if (seg_ != nullptr) ::munmap(seg_, bytes_);
}

void HostRendezvous::unlink() { ::shm_unlink(name_.c_str()); }

std::string HostRendezvous::unique_name() {
  std::random_device rd;
  return strfmt("/tpgemm-%d-%08x", static_cast<int>(::getpid()), rd());
}

void HostRendezvous::agree(const Status& mine, const char* what, int64_t timeout_ms) {
  if (seg_->magic != kMagic || seg_->world != world_)
    throw Error(ErrorCode::kInternal, strfmt("rank %d: the rendezvous segment %s is not initialised", rank_, name_.c_str()));
  auto abandoned = [&] {
    return Error(ErrorCode::kPeerFailure, strfmt("rank %d: the team gave up on an earlier collective call: %s", rank_,
                                                 seg_->failure));
  };
  if (seg_->failed.load(std::memory_order_acquire) != 0) throw abandoned();
  const uint64_t call = ++calls_;
  const int parity = static_cast<int>(call & 1);
  RankSlot& me = seg_->slots[rank_];
  me.code[parity] = static_cast<int32_t>(mine.code);
  std::snprintf(me.message[parity], sizeof(me.message[parity]), "%s", mine.message.c_str());
  me.arrived.store(call, std::memory_order_release);

  const auto t0 = std::chrono::steady_clock::now();
  for (int q = 0; q < world_; ++q) {
    int spins = 0;
    while (seg_->slots[q].arrived.load(std::memory_order_acquire) < call) {
      if (++spins < 1000) continue;
      if (seg_->failed.load(std::memory_order_acquire) != 0) throw abandoned();
      const auto waited = std::chrono::steady_clock::now() - t0;
      if (waited > std::chrono::milliseconds(timeout_ms)) {
        const std::string why =
            strfmt("rank %d waited %lld ms for rank %d to reach collective call #%llu (%s); rank %d is still at call "
                   "#%llu. Every rank must make the same tpgemm calls in the same order.",
                   rank_, (long long)timeout_ms, q, (unsigned long long)call, what, q,
                   (unsigned long long)seg_->slots[q].arrived.load());
        std::snprintf(seg_->failure, sizeof(seg_->failure), "%s", why.c_str());
        seg_->failed.store(1, std::memory_order_release);
        throw Error(ErrorCode::kTimeout, why);
      }
      // Spin briefly (ranks usually arrive within microseconds), then back off so that a rank
      // waiting for a slow peer's host does not burn a core.
      if (waited > std::chrono::milliseconds(1)) std::this_thread::sleep_for(std::chrono::microseconds(20));
      else std::this_thread::yield();
    }
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
