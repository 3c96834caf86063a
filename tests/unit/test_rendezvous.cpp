// The per-call host rendezvous (NOTE [collective argument check]) across real processes.
#include <gtest/gtest.h>

#include <sys/mman.h>

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
                r.agree(Status::Ok(), "test call", 1, 5000);
              }
              return 0;
            }),
            0);
}

TEST(HostRendezvous, OneBadRankMakesEveryRankThrowInTheSameCall) {
  EXPECT_EQ(with_rendezvous(4, [](int rank, HostRendezvous& r) {
              r.agree(Status::Ok(), "warm-up", 1, 5000);
              try {
                const Status mine = rank == 2 ? Status{ErrorCode::kInvalidArgument, "A is null"} : Status::Ok();
                r.agree(mine, "Plan::run operands", 1, 5000);
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

// NOTE [peer whereabouts]: what a rank that gives up reads of its peers. Rank 1 waits for its
// peers (posted), rank 2's process has exited, rank 3 is busy elsewhere after a wait of its own.
TEST(HostRendezvous, WhereaboutsNameEachPeersWaitOrExit) {
  EXPECT_EQ(with_rendezvous(4, [](int rank, HostRendezvous& r) {
              r.agree(Status::Ok(), "start", 1, 5000);
              if (rank == 2) return 0;  // exits
              if (rank == 1) r.begin_wait("the planner's timed calls");
              if (rank == 3) {
                r.begin_wait("a barrier of the team");
                r.end_wait();
              }
              if (rank != 0) {
                std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // while rank 0 looks
                return 0;
              }
              std::string w;
              for (int i = 0; i < 100; ++i) {  // until rank 2's exit shows
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                w = r.whereabouts();
                if (w.find("has exited") != std::string::npos && w.find("rank 3") != std::string::npos &&
                    w.find("its last") != std::string::npos)
                  break;
              }
              const auto has = [&](const char* s) { return w.find(s) != std::string::npos; };
              std::fprintf(stderr, "rank 0 reads: %s\n", w.c_str());
              if (!has("rank 1 (pid ") || !has("has waited") || !has("for the planner's timed calls")) return 11;
              if (!has("rank 2 (pid ") || !has("has exited")) return 12;
              if (!has("rank 3 (pid ") || !has("is in no wait for its peers (its last: for a barrier of the team)"))
                return 13;
              if (has("rank 0")) return 14;  // the others only
              return 0;
            }),
            0);
}

TEST(HostRendezvous, AnAbsentRankIsATimeoutNamingIt) {
  EXPECT_EQ(with_rendezvous(3, [](int rank, HostRendezvous& r) {
              if (rank == 1) {
                // Arrives long after the others gave up: it must not go on alone.
                std::this_thread::sleep_for(std::chrono::milliseconds(1500));
                try {
                  r.agree(Status::Ok(), "call", 1, 300);
                  return 22;
                } catch (const Error& e) {
                  return e.code() == ErrorCode::kPeerFailure && std::string(e.what()).find("gave up") != std::string::npos ? 0 : 23;
                }
              }
              try {
                r.agree(Status::Ok(), "call", 1, 300);
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

// One plan, called with a different M on each rank (the description says it): not one call.
TEST(HostRendezvous, OnePlansCallsWithDifferentDescriptionsThrowOnEveryRank) {
  EXPECT_EQ(with_rendezvous(2, [](int rank, HostRendezvous& r) {
              try {
                r.agree(Status::Ok(), rank == 0 ? "Plan::run with M=512" : "Plan::run with M=1024", 7, 5000);
                return 40;
              } catch (const Error& e) {
                const std::string m = e.what();
                return e.code() == ErrorCode::kInvalidArgument && m.find("M=512") != std::string::npos &&
                               m.find("M=1024") != std::string::npos
                           ? 0
                           : 41;
              }
            }),
            0);
}

// Rank 0 runs one plan while rank 1 runs another (or an all-reduce): a different collective call
// on each, which must not pass as one.
TEST(HostRendezvous, RanksInDifferentCallsThrowOnEveryRankNamingBoth) {
  EXPECT_EQ(with_rendezvous(2, [](int rank, HostRendezvous& r) {
              r.agree(Status::Ok(), "Plan::run", 1, 5000);
              try {
                r.agree(Status::Ok(), rank == 0 ? "Plan::run" : "AllReducePlan::run", rank == 0 ? 1 : 2, 5000);
                return 30;
              } catch (const Error& e) {
                const std::string m = e.what();
                return e.code() == ErrorCode::kInvalidArgument && m.find("different collective calls") != std::string::npos &&
                               m.find("AllReducePlan::run of plan #2") != std::string::npos
                           ? 0
                           : 31;
              }
            }),
            0);
}

// Rank 1 arrives around the moment rank 0 gives up on it (2 ms), over many trials: both must
// come to the same end, both through or both stopped (before, a rank could pass alone).
TEST(HostRendezvous, ARankArrivingAsItsPeerGivesUpEndsLikeIt) {
  constexpr int kTrials = 300;
  auto* outcome = static_cast<int*>(::mmap(nullptr, sizeof(int) * 2 * kTrials, PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(outcome, MAP_FAILED);
  for (int trial = 0; trial < kTrials; ++trial) {
    ASSERT_EQ(with_rendezvous(2, [&](int rank, HostRendezvous& r) {
                if (rank == 1) std::this_thread::sleep_for(std::chrono::microseconds(1500 + trial * 1000 / kTrials));
                try {
                  r.agree(Status::Ok(), "call", 1, rank == 0 ? 2 : 5000);
                  outcome[2 * trial + rank] = 1;  // through
                } catch (const Error&) {
                  outcome[2 * trial + rank] = 2;  // stopped
                }
                return 0;
              }),
              0);
  }
  int split = 0, through = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    split += outcome[2 * trial] != outcome[2 * trial + 1];
    through += outcome[2 * trial] == 1;
  }
  ::munmap(outcome, sizeof(int) * 2 * kTrials);
  EXPECT_EQ(split, 0) << "of " << kTrials << " trials (" << through << " went through)";
}

}  // namespace
}  // namespace tpgemm::comm
