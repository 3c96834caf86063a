#include "comm/bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include "core/env.h"
#include "core/format.h"
#include "tpgemm/error.h"

namespace tpgemm::comm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint32_t kMagic = 0x54504732;  // "TPG2"
// A connection must say who it is within this, or rank 0 drops it (a port scanner, a health
// check) and goes on with the others.
constexpr int64_t kHelloMs = 2000;

// NOTE [unique-id exchange]
// Every rank connects to rank 0 and says who it is and whether it is fit to join (its local
// checks, such as its device, come first). Rank 0 answers nobody until every rank has arrived,
// then answers all of them alike: the unique id, or why the team will not be made. So either
// every rank goes on to create the communicator or none does: a rank left inside NCCL's
// initialisation waiting for peers that gave up would wait there for good.
struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t world;
  uint32_t payload_size;
  int32_t code;  // this rank's local verdict (tpgemm ErrorCode), and why
  char message[240];
};
struct Reply {
  uint32_t magic;
  int32_t code;  // kOk: the payload follows; else the ErrorCode this rank throws, with `message`
  char message[240];
};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { if (fd_ >= 0) ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// What poll() may wait before the deadline: at least 0, at most what its int holds.
int poll_ms(Clock::time_point deadline) {
  const int64_t left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, std::numeric_limits<int>::max()));
}

// Waits until `fd` is ready for `events`, or the deadline passes (false). A signal is not an
// end: the wait goes on with the time that is left.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd pfd{fd, events, 0};
    const int ms = poll_ms(deadline);
    if (ms <= 0) return false;
    const int k = ::poll(&pfd, 1, ms);
    if (k > 0) return true;
    if (k == 0 || errno != EINTR) return false;
  }
}

// connect() that gives up at the deadline: a blocking one to an address that drops packets waits
// for the kernel's SYN retries (minutes), whatever the caller's timeout. False with errno set.
bool connect_by(int fd, const sockaddr* addr, socklen_t len, Clock::time_point deadline) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return false;
  bool ok = ::connect(fd, addr, len) == 0;
  if (!ok && errno == EINPROGRESS) {
    if (!wait_ready(fd, POLLOUT, deadline)) {
      errno = ETIMEDOUT;
      return false;
    }
    int err = 0;
    socklen_t n = sizeof(err);
    ok = ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &n) == 0 && err == 0;
    if (!ok && err != 0) errno = err;
  }
  if (ok && ::fcntl(fd, F_SETFL, flags) < 0) return false;  // blocking again, as io_all expects
  return ok;
}

// Reads or writes exactly n bytes before the deadline.
bool io_all(int fd, void* buf, size_t n, bool write, Clock::time_point deadline) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    if (!wait_ready(fd, write ? POLLOUT : POLLIN, deadline)) return false;
    const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k <= 0) {
      if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

std::optional<int64_t> env_int_any(const char* const* names, const char** which) {
  for (const char* const* n = names; *n != nullptr; ++n)
    if (auto v = env_int(*n, 0, 1 << 30)) {
      *which = *n;
      return v;
    }
  return std::nullopt;
}

void answer(int fd, ErrorCode code, const std::string& message, const std::vector<uint8_t>& payload,
            Clock::time_point deadline) {
  Reply rep{};
  rep.magic = kMagic;
  rep.code = static_cast<int32_t>(code);
  std::snprintf(rep.message, sizeof(rep.message), "%s", message.c_str());
  if (io_all(fd, &rep, sizeof(rep), true, deadline) && code == ErrorCode::kOk)
    io_all(fd, const_cast<uint8_t*>(payload.data()), payload.size(), true, deadline);
}

std::vector<uint8_t> serve(const LaunchEnv& env, const std::vector<uint8_t>& payload, const Status& mine,
                           Clock::time_point deadline) {
  Fd ls(::socket(AF_INET, SOCK_STREAM, 0));
  if (ls.get() < 0) throw Error(ErrorCode::kInvalidArgument, strfmt("rank 0: socket(): %s", std::strerror(errno)));
  int one = 1;
  ::setsockopt(ls.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(env.port));
  if (::bind(ls.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    throw Error(ErrorCode::kInvalidArgument,
                strfmt("rank 0: cannot listen on port %d for the unique-id exchange: %s (set TPGEMM_BOOTSTRAP_PORT to a free port)",
                       env.port, std::strerror(errno)));
  if (::listen(ls.get(), env.world) != 0)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank 0: listen(): %s", std::strerror(errno)));
  // Why the team will not be made (the first reason found), and whose fault it is (-1: none yet).
  std::string why = mine.ok() ? "" : "rank 0: " + mine.message;
  int culprit = mine.ok() ? -1 : 0;
  std::vector<Fd> peer(static_cast<size_t>(env.world));
  for (int arrived = 0; arrived < env.world - 1;) {
    if (!wait_ready(ls.get(), POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < env.world; ++r)
        if (peer[r].get() < 0) missing += strfmt("%s%d", missing.empty() ? "" : ",", r);
      const std::string msg = strfmt("rank 0 waited for ranks [%s] to fetch the unique id on port %d and they did not "
                                     "come (%d of %d arrived)", missing.c_str(), env.port, arrived, env.world - 1);
      for (const Fd& c : peer)
        if (c.get() >= 0) answer(c.get(), ErrorCode::kTimeout, msg, payload, Clock::now() + std::chrono::seconds(1));
      if (!mine.ok()) throw Error(mine);
      throw Error(ErrorCode::kTimeout, msg);
    }
    Fd c(::accept(ls.get(), nullptr, nullptr));
    if (c.get() < 0) continue;
    Hello h{};
    const auto hello_by = std::min(deadline, Clock::now() + std::chrono::milliseconds(kHelloMs));
    if (!io_all(c.get(), &h, sizeof(h), false, hello_by) || h.magic != kMagic) continue;  // not one of ours
    h.message[sizeof(h.message) - 1] = '\0';
    std::string bad;  // what is wrong with this hello itself
    if (h.rank <= 0 || h.rank >= env.world) bad = strfmt("rank %d is out of range [1, %d)", h.rank, env.world);
    else if (peer[h.rank].get() >= 0) bad = strfmt("two processes claim rank %d", h.rank);
    if (!bad.empty()) {  // not a rank we wait for: answered now, and the exchange fails
      answer(c.get(), ErrorCode::kInvalidArgument, "unique-id exchange: " + bad, payload, deadline);
      if (culprit < 0) why = bad, culprit = h.rank > 0 && h.rank < env.world ? h.rank : 0;
      continue;
    }
    if (culprit < 0) {
      if (h.world != env.world) why = strfmt("rank %d says the world has %d ranks, rank 0 says %d", h.rank, h.world, env.world);
      else if (h.payload_size != payload.size())
        why = strfmt("rank %d expects %u bytes, rank 0 sends %zu", h.rank, h.payload_size, payload.size());
      else if (h.code != 0) why = strfmt("rank %d failed: %s", h.rank, h.message);
      if (!why.empty()) culprit = h.rank;
    }
    peer[h.rank] = std::move(c);
    ++arrived;
  }
  // A rank that left while it waited (its process died) will not join NCCL: nobody may.
  for (int r = 1; r < env.world && culprit < 0; ++r) {
    char byte = 0;
    pollfd pfd{peer[r].get(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0 && ::recv(peer[r].get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0)
      why = strfmt("rank %d left the exchange before it ended", r), culprit = r;
  }
  for (int r = 1; r < env.world; ++r)
    answer(peer[r].get(), culprit < 0 ? ErrorCode::kOk : r == culprit ? ErrorCode::kInvalidArgument : ErrorCode::kPeerFailure,
           culprit < 0 ? "" : "unique-id exchange: " + why, payload, deadline);
  if (culprit < 0) return payload;
  if (!mine.ok()) throw Error(mine);
  throw Error(culprit == 0 ? ErrorCode::kInvalidArgument : ErrorCode::kPeerFailure,
              strfmt("rank 0: the unique-id exchange stopped: %s", why.c_str()));
}

std::vector<uint8_t> fetch(const LaunchEnv& env, size_t payload_size, const Status& mine, Clock::time_point deadline,
                           Clock::duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(env.port);
  if (::getaddrinfo(env.master_addr.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr)
    throw Error(ErrorCode::kInvalidArgument, strfmt("rank %d: cannot resolve MASTER_ADDR='%s'", env.rank, env.master_addr.c_str()));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> addr(res, ::freeaddrinfo);
  Hello h{kMagic, env.rank, env.world, static_cast<uint32_t>(payload_size), static_cast<int32_t>(mine.code), {}};
  std::snprintf(h.message, sizeof(h.message), "%s", mine.message.c_str());
  std::string last_error = "no attempt";
  while (poll_ms(deadline) > 0) {
    Fd c(::socket(AF_INET, SOCK_STREAM, 0));
    if (c.get() >= 0 && connect_by(c.get(), addr->ai_addr, addr->ai_addrlen, deadline)) {
      // Rank 0 answers once every rank has arrived, or when it gives up, by its own deadline: so
      // once it holds our hello, we wait for its answer past ours (leaving now would let the others
      // go on into NCCL without us). A connection it dropped (it took us for a stranger) is tried
      // again.
      Reply rep{};
      const auto answer_by = std::max(deadline, Clock::now()) + timeout;
      const bool answered = io_all(c.get(), &h, sizeof(h), true, deadline) &&
                            io_all(c.get(), &rep, sizeof(rep), false, answer_by) && rep.magic == kMagic;
      if (!answered && Clock::now() >= answer_by) {
        if (!mine.ok()) throw Error(mine);
        throw Error(ErrorCode::kTimeout, strfmt("rank %d: rank 0 at %s:%d took this rank's hello and did not answer "
                                                "by the end of its own wait", env.rank, env.master_addr.c_str(), env.port));
      }
      if (answered) {
        rep.message[sizeof(rep.message) - 1] = '\0';
        if (!mine.ok()) throw Error(mine);
        if (rep.code != 0) throw Error(static_cast<ErrorCode>(rep.code), strfmt("rank %d: %s", env.rank, rep.message));
        std::vector<uint8_t> out(payload_size);
        if (!io_all(c.get(), out.data(), out.size(), false, answer_by))
          throw Error(ErrorCode::kTimeout, strfmt("rank %d: the unique id from rank 0 was cut short", env.rank));
        return out;
      }
      last_error = "rank 0 closed the connection without an answer";
    } else {
      last_error = std::strerror(errno);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!mine.ok()) throw Error(mine);
  throw Error(ErrorCode::kTimeout, strfmt("rank %d waited for rank 0 at %s:%d to hand out the unique id and could not "
                                          "reach it (%s)", env.rank, env.master_addr.c_str(), env.port, last_error.c_str()));
}

}  // namespace

std::optional<LaunchEnv> read_launch_env() {
  static const char* const kRank[] = {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", nullptr};
  static const char* const kWorld[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", nullptr};
  static const char* const kLocal[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", nullptr};
  const char *rank_var = nullptr, *world_var = nullptr, *local_var = nullptr;
  const auto rank = env_int_any(kRank, &rank_var);
  const auto world = env_int_any(kWorld, &world_var);
  if (!rank && !world) return std::nullopt;
  if (!rank || !world)
    throw Error(ErrorCode::kInvalidArgument,
                strfmt("%s is set but none of %s is: a launcher sets both the rank and the world size", rank ? rank_var : world_var,
                       rank ? "WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS, PMI_SIZE" : "RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMI_RANK"));
  if (*world < 1 || *rank >= *world)
    throw Error(ErrorCode::kInvalidArgument, strfmt("%s=%lld with %s=%lld: expected 0 <= rank < world size", rank_var,
                                                    (long long)*rank, world_var, (long long)*world));
  LaunchEnv e;
  e.rank = static_cast<int>(*rank);
  e.world = static_cast<int>(*world);
  const auto local = env_int_any(kLocal, &local_var);
  e.local_rank = local ? static_cast<int>(*local) : e.rank;
  e.source = strfmt("%s/%s/%s", rank_var, world_var, local ? local_var : "(LOCAL_RANK unset: using the rank)");
  if (auto a = env_string("MASTER_ADDR")) e.master_addr = *a;
  if (auto p = env_int("TPGEMM_BOOTSTRAP_PORT", 1, 65535)) e.port = static_cast<int>(*p);
  else if (auto mp = env_int("MASTER_PORT", 1, 65534)) e.port = static_cast<int>(*mp) + 1;
  else if (e.world > 1)
    throw Error(ErrorCode::kInvalidArgument, "MASTER_PORT (or TPGEMM_BOOTSTRAP_PORT) is not set: rank 0 needs a port to "
                                             "hand out the NCCL unique id");
  return e;
}

std::vector<uint8_t> tcp_broadcast(const LaunchEnv& env, const std::vector<uint8_t>& payload, size_t payload_size,
                                   int64_t timeout_ms, const Status& mine) {
  if (env.world == 1) {
    if (!mine.ok()) throw Error(mine);
    return payload;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  if (env.rank == 0) {
    if (payload.size() != payload_size) throw Error(ErrorCode::kInternal, "tcp_broadcast: payload size mismatch");
    return serve(env, payload, mine, deadline);
  }
  return fetch(env, payload_size, mine, deadline, std::chrono::milliseconds(timeout_ms));
}

}  // namespace tpgemm::comm
