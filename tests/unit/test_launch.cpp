// The built-in launcher, the torchrun / mpirun environment, and the TCP unique-id exchange,
// with several real processes on this CPU machine.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/bootstrap.h"
#include "comm/launcher.h"
#include "tpgemm/error.h"

namespace tpgemm::comm {
namespace {

using Clock = std::chrono::steady_clock;

TEST(Launcher, RunsEveryRankAndReportsSuccess) {
  EXPECT_EQ(run_workers(4, [](int) { return 0; }), 0);
}

TEST(Launcher, AFailingRankStopsTheOthersPromptly) {
  const auto t0 = Clock::now();
  const int rc = run_workers(3, [](int rank) {
    if (rank == 1) return 7;
    std::this_thread::sleep_for(std::chrono::seconds(60));  // a peer stuck waiting for rank 1
    return 0;
  });
  EXPECT_EQ(rc, 7);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(20));
}

// As under torchrun: a rank killed by a signal leaves the others running; they finish on their
// own, and the run reports the first failure.
TEST(Launcher, WithoutStoppingPeersTheOthersFinishOnTheirOwn) {
  char path[] = "/tmp/tpgemm-launch-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  LauncherOptions o;
  o.stop_peers_on_failure = false;
  const int rc = run_workers(2, [&](int rank) {
    if (rank == 1) ::raise(SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // outlives rank 1
    std::FILE* f = std::fopen(path, "w");
    std::fputs("survived", f);
    std::fclose(f);
    return 0;
  }, o);
  EXPECT_EQ(rc, 128 + SIGKILL);
  char got[16] = {};
  std::FILE* f = std::fopen(path, "r");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(std::fread(got, 1, sizeof(got) - 1, f), 8u);
  std::fclose(f);
  std::remove(path);
  EXPECT_STREQ(got, "survived");
}

TEST(Launcher, AnExceptionIsAFailure) {
  EXPECT_EQ(run_workers(2, [](int rank) -> int {
              if (rank == 0) throw Error(ErrorCode::kInvalidArgument, "boom");
              return 0;
            }),
            1);
}

TEST(Launcher, OverallTimeoutKillsHungWorkers) {
  LauncherOptions o;
  o.timeout_s = 1;
  o.grace_s = 1;
  EXPECT_EQ(run_workers(2, [](int) {
              std::this_thread::sleep_for(std::chrono::seconds(60));
              return 0;
            }, o),
            124);
}

class EnvGuard {
 public:
  EnvGuard() : EnvGuard(std::vector<std::pair<std::string, std::string>>{}) {}
  explicit EnvGuard(std::vector<std::pair<std::string, std::string>> vars) {
    for (const char* n : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TPGEMM_BOOTSTRAP_PORT",
                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
                          "SLURM_NTASKS", "SLURM_LOCALID", "PMI_RANK", "PMI_SIZE"}) {
      if (const char* v = std::getenv(n)) saved_.emplace_back(n, v);
      ::unsetenv(n);
      cleared_.push_back(n);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~EnvGuard() {
    for (const auto& n : cleared_) ::unsetenv(n.c_str());
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
  std::vector<std::string> cleared_;
};

TEST(LaunchEnv, NoneWithoutALauncher) {
  EnvGuard g;
  EXPECT_FALSE(read_launch_env().has_value());
}

TEST(LaunchEnv, TorchrunVariables) {
  EnvGuard g({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "29500"}});
  const auto e = read_launch_env();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->master_addr, "10.1.2.3");
  EXPECT_EQ(e->port, 29501) << "torchrun's agent holds MASTER_PORT itself";
}

TEST(LaunchEnv, OpenMpiVariablesAndAnExplicitPort) {
  EnvGuard g({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
              {"TPGEMM_BOOTSTRAP_PORT", "40000"}});
  const auto e = read_launch_env();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->world, 2);
  EXPECT_EQ(e->port, 40000);
  EXPECT_EQ(e->master_addr, "127.0.0.1");
}

TEST(LaunchEnv, InconsistentVariablesAreNamed) {
  {
    EnvGuard g({{"RANK", "4"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "1234"}});
    try {
      read_launch_env();
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("RANK=4"), std::string::npos) << e.what();
    }
  }
  {
    EnvGuard g({{"RANK", "0"}, {"PMI_SIZE_UNUSED", ""}});
    EXPECT_THROW(read_launch_env(), Error);
  }
  {
    EnvGuard g({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
    try {
      read_launch_env();
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("MASTER_PORT"), std::string::npos) << e.what();
    }
  }
  {
    EnvGuard g({{"RANK", "zero"}, {"WORLD_SIZE", "2"}});
    EXPECT_THROW(read_launch_env(), Error);
  }
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(UniqueIdExchange, EveryRankReceivesRankZerosBytes) {
  const int port = free_port();
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i * 37 + 11);
  const int rc = run_workers(4, [&](int rank) {
    LaunchEnv e;
    e.rank = rank;
    e.world = 4;
    e.port = port;
    // Rank 0 starts late: the others must retry, not fail.
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto got = tcp_broadcast(e, rank == 0 ? id : std::vector<uint8_t>{}, id.size(), 10000);
    return got == id ? 0 : 3;
  });
  EXPECT_EQ(rc, 0);
}

TEST(UniqueIdExchange, AWorldSizeMismatchFailsOnBothSides) {
  const int port = free_port();
  const std::vector<uint8_t> id(128, 1);
  const int rc = run_workers(2, [&](int rank) {
    LaunchEnv e;
    e.rank = rank;
    e.world = rank == 0 ? 2 : 3;
    e.port = port;
    try {
      tcp_broadcast(e, rank == 0 ? id : std::vector<uint8_t>{}, id.size(), 5000);
    } catch (const Error& err) {
      return std::string(err.what()).find("world") != std::string::npos ? 0 : 4;
    }
    return 5;  // should have failed
  });
  EXPECT_EQ(rc, 0);
}

// NOTE [unique-id exchange]: a rank that failed its local checks (here, rank 2's device; then
// rank 0 itself) still comes to the exchange, and every rank throws before any gets the id: the
// failed rank its own error, the others PeerFailure naming it. Nobody waits for the deadline.
TEST(UniqueIdExchange, ARankThatFailedItsChecksStopsEveryRankBeforeTheId) {
  for (int bad : {2, 0}) {
    const int port = free_port();
    const std::vector<uint8_t> id(128, 7);
    const auto t0 = Clock::now();
    const int rc = run_workers(3, [&](int rank) {
      LaunchEnv e;
      e.rank = rank;
      e.world = 3;
      e.port = port;
      const Status mine = rank == bad ? Status{ErrorCode::kInvalidArgument, "device 1 does not exist"} : Status::Ok();
      try {
        tcp_broadcast(e, rank == 0 ? id : std::vector<uint8_t>{}, id.size(), 20000, mine);
      } catch (const Error& err) {
        const std::string m = err.what();
        if (rank == bad) return err.code() == ErrorCode::kInvalidArgument && m.find("device 1") != std::string::npos ? 0 : 6;
        return err.code() == ErrorCode::kPeerFailure && m.find("rank " + std::to_string(bad)) != std::string::npos &&
                       m.find("device 1") != std::string::npos
                   ? 0
                   : 7;
      }
      return 8;  // should have failed
    });
    EXPECT_EQ(rc, 0) << "bad rank " << bad;
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  }
}

// A connection that never says who it is (a port scanner, a health check) is dropped after a
// short while; the real ranks still get the id, long before the deadline.
TEST(UniqueIdExchange, ASilentConnectionDoesNotStallTheExchange) {
  const int port = free_port();
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i * 7 + 3);
  const auto t0 = Clock::now();
  const int rc = run_workers(3, [&](int rank) {
    if (rank == 2) {  // the stranger: connects first and stays silent
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port));
      const bool connected = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
      std::this_thread::sleep_for(std::chrono::seconds(6));
      ::close(fd);
      return connected ? 0 : 9;
    }
    LaunchEnv e;
    e.rank = rank;
    e.world = 2;
    e.port = port;
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));  // after the stranger
    const auto got = tcp_broadcast(e, rank == 0 ? id : std::vector<uint8_t>{}, id.size(), 30000);
    return got == id && Clock::now() - t0 < std::chrono::seconds(5) ? 0 : 10;
  });
  EXPECT_EQ(rc, 0);
}

// Rank 1 starts long before rank 0 and rank 2 last: its own deadline passes while it waits for
// rank 0's answer, which comes by rank 0's. It must wait for it, not leave (then ranks 0 and 2
// would go on into NCCL without it); and a signal during any wait is not an end either.
TEST(UniqueIdExchange, AnEarlyRankWaitsForTheAnswerAndSignalsDoNotEndTheWait) {
  const int port = free_port();
  std::vector<uint8_t> id(128);
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(i * 5 + 1);
  const int rc = run_workers(3, [&](int rank) {
    struct sigaction sa {};
    sa.sa_handler = [](int) {};  // no SA_RESTART: a poll() it interrupts fails with EINTR
    ::sigaction(SIGUSR1, &sa, nullptr);
    const pthread_t self = ::pthread_self();
    std::thread poke([self] {
      for (int i = 0; i < 6; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        ::pthread_kill(self, SIGUSR1);
      }
    });
    LaunchEnv e;
    e.rank = rank;
    e.world = 3;
    e.port = port;
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (rank == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    int result = 0;
    try {
      const auto got = tcp_broadcast(e, rank == 0 ? id : std::vector<uint8_t>{}, id.size(), 1000);
      result = got == id ? 0 : 11;
    } catch (const Error& err) {
      std::fprintf(stderr, "rank %d: %s\n", rank, err.what());
      result = 12;
    }
    poke.join();
    return result;
  });
  EXPECT_EQ(rc, 0);
}

TEST(UniqueIdExchange, AMissingRankZeroIsATimeoutThatSaysSo) {
  LaunchEnv e;
  e.rank = 1;
  e.world = 2;
  e.port = free_port();
  const auto t0 = Clock::now();
  try {
    tcp_broadcast(e, {}, 128, 500);
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(err.what()).find("rank 1 waited for rank 0"), std::string::npos) << err.what();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

// MASTER_ADDR that drops every packet (TEST-NET-1, reserved for documentation: nothing answers):
// a blocking connect() would wait for the kernel's SYN retries, minutes; the exchange's own timeout
// must end it. (Where the network refuses the address at once, this passes either way.)
TEST(UniqueIdExchange, AnUnreachableMasterAddrIsATimeoutWithinTheBound) {
  LaunchEnv e;
  e.rank = 1;
  e.world = 2;
  e.master_addr = "192.0.2.1";
  e.port = 29500;
  const auto t0 = Clock::now();
  try {
    tcp_broadcast(e, {}, 128, 700);
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kTimeout) << err.what();
    EXPECT_NE(std::string(err.what()).find("192.0.2.1"), std::string::npos) << err.what();
  }
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
}

}  // namespace
}  // namespace tpgemm::comm
