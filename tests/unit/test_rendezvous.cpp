// The per-call host rendezvous (NOTE [collective argument check]) across real processes.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/host_rendezvous.h"
#include "comm/launcher.h"

namespace tpgemm::comm {
namespace {

// Rank 0's segment is made before the fork; each worker opens it by name.
template <typename F>
int with_rendezvous(int world, F&& body) {
  const std::string name = HostRendezvous::unique_name();
  HostRendezvous creator(name, 0, world, true);
  const int rc = run_workers(world, [&](int rank) {
    HostRendezvous r(name, rank, world, false);
    return body(rank, r);
  });
  creator.unlink();
  return rc;
}

TEST(HostRendezvous, ManyCallsAllGood) {
  EXPECT_EQ(with_rendezvous(4, [](int rank, HostRendezvous& r) {
              for (int call = 0; call < 200; ++call) {
                if (rank == call % 4) std::this_thread::sleep_for(std::chrono::microseconds(50));
                r.agree(Status::Ok(), "test call", 5000);
              }
              return 0;
            }),
            0);
}

TEST(HostRendezvous, OneBadRankMakesEveryRankThrowInTheSameCall) {
  EXPECT_EQ(with_rendezvous(4, [](int rank, HostRendezvous& r) {
              r.agree(Status::Ok(), "warm-up", 5000);
              try {
                const Status mine = rank == 2 ? Status{ErrorCode::kInvalidArgument, "A is null"} : Status::Ok();
                r.agree(mine, "Plan::run operands", 5000);
                return 10;  // nobody may pass
              } catch (const Error& e) {
                const std::string m = e.what();
                if (rank == 2) return e.code() == ErrorCode::kInvalidArgument && m.find("A is null") != std::string::npos ? 0 : 11;
                return e.code() == ErrorCode::kPeerFailure && m.find("rank 2") != std::string::npos &&
                               m.find("A is null") != std::string::npos
                           ? 0
                           : 12;
              }
            }),
            0);
}

TEST(HostRendezvous, AnAbsentRankIsATimeoutNamingIt) {
  EXPECT_EQ(with_rendezvous(3, [](int rank, HostRendezvous& r) {
              if (rank == 1) {
                // Arrives long after the others gave up: it must not go on alone.
                std::this_thread::sleep_for(std::chrono::milliseconds(1500));
                try {
                  r.agree(Status::Ok(), "call", 300);
                  return 22;
                } catch (const Error& e) {
                  return e.code() == ErrorCode::kPeerFailure && std::string(e.what()).find("gave up") != std::string::npos ? 0 : 23;
                }
              }
              try {
                r.agree(Status::Ok(), "call", 300);
                return 20;
              } catch (const Error& e) {
                const std::string m = e.what();
                // The first to run out reports Timeout; one that finds the team abandoned, PeerFailure.
                const bool code_ok = e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kPeerFailure;
                return code_ok && m.find("for rank 1") != std::string::npos ? 0 : 21;
              }
            }),
            0);
}

}  // namespace
}  // namespace tpgemm::comm
