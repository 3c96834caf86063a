// NOTE [agreement]: the host-side exchanges of plan and team set-up, W ranks as threads of one
// process. A rank that fails between two nested steps meets its peers at a different step; every
// rank must still throw (the bad one its own error, the others PeerFailure naming it), none may
// wait alone, and the team's exchanges stay in step afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/agreement.h"
#include "core/poll.h"

namespace tpgemm::comm {
namespace {

// All-gathers among threads; a thread left waiting alone for 2 s throws "hang" instead.
class ThreadTransport {
 public:
  explicit ThreadTransport(int world) : world_(world), slots_(world) {}
  Agreement::Transport for_rank(int r) {
    return [this, r](const uint8_t* mine, uint8_t* all, size_t slot) {
      std::unique_lock<std::mutex> lock(mu_);
      slots_[r].assign(mine, mine + slot);
      const uint64_t gen = generation_;
      if (++arrived_ == world_) {
        arrived_ = 0;
        snapshot_ = slots_;
        ++generation_;
        cv_.notify_all();
      } else if (!cv_.wait_for(lock, std::chrono::seconds(2), [&] { return generation_ != gen; })) {
        throw std::runtime_error("hang: rank " + std::to_string(r) + " waited alone in an exchange");
      }
      for (int q = 0; q < world_; ++q) std::memcpy(all + slot * q, snapshot_[q].data(), slot);
    };
  }

 private:
  int world_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  std::vector<std::vector<uint8_t>> slots_, snapshot_;
};

// Runs body(rank, agreement) on W threads; returns what each threw (code kOk if nothing, and a
// "hang" or other non-tpgemm exception as kInternal).
std::vector<Status> on_ranks(int world, const std::function<void(int, Agreement&)>& body) {
  ThreadTransport transport(world);
  std::vector<Status> result(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      Agreement a(r, world, transport.for_rank(r));
      try {
        body(r, a);
      } catch (const Error& e) {
        result[r] = e.status();
      } catch (const std::exception& e) {
        result[r] = {ErrorCode::kInternal, e.what()};
      }
    });
  for (auto& t : threads) t.join();
  return result;
}

bool has(const Status& s, const std::string& text) { return s.message.find(text) != std::string::npos; }

TEST(Agreement, AllGatherReturnsEveryRanksBlobInRankOrder) {
  const auto result = on_ranks(4, [](int rank, Agreement& a) {
    const int32_t mine = 100 + rank;
    const auto all = a.allgather(&mine, sizeof(mine), "a test");
    for (int q = 0; q < 4; ++q) {
      int32_t theirs = 0;
      std::memcpy(&theirs, all[q].data(), sizeof(theirs));
      if (theirs != 100 + q) throw Error(ErrorCode::kInternal, "wrong blob");
    }
    a.agree(Status::Ok(), "the same", "a test");
    a.barrier("a test");
  });
  for (const Status& s : result) EXPECT_TRUE(s.ok()) << s.message;
}

TEST(Agreement, DifferentDescriptionsThrowOnEveryRankNamingBoth) {
  const auto result = on_ranks(3, [](int rank, Agreement& a) {
    a.agree(Status::Ok(), rank == 2 ? "M=512" : "M=256", "the plan");
  });
  for (const Status& s : result)
    EXPECT_TRUE(s.code == ErrorCode::kInvalidArgument && has(s, "M=256") && has(s, "M=512") && has(s, "rank 2"))
        << s.message;
}

TEST(Agreement, ALocalFailureThrowsItsOwnErrorThereAndPeerFailureElsewhere) {
  const auto result = on_ranks(3, [](int rank, Agreement& a) {
    a.agree_local("allocating", [&] {
      if (rank == 1) throw Error(ErrorCode::kCudaError, "out of memory on rank 1");
    });
  });
  EXPECT_TRUE(result[1].code == ErrorCode::kCudaError && has(result[1], "out of memory")) << result[1].message;
  for (int r : {0, 2})
    EXPECT_TRUE(result[r].code == ErrorCode::kPeerFailure && has(result[r], "rank 1 failed") &&
                has(result[r], "out of memory"))
        << result[r].message;
}

// The hang the note is about: rank 1 fails inside the outer step before the inner ones, so its
// outer agree meets its peers' inner agree, all-gather or barrier. Every rank throws, and the
// next exchange (a later plan) finds all of them in step.
TEST(Agreement, ARankFailingBetweenNestedStepsStopsEveryRankAndLeavesThemInStep) {
  for (int inner = 0; inner < 3; ++inner) {
    const auto result = on_ranks(3, [&](int rank, Agreement& a) {
      try {
        a.agree_local("building the plan", [&] {
          if (rank == 1) throw Error(ErrorCode::kInvalidArgument, "TPGEMM_SYMM_THREADS=abc: expected an integer");
          if (inner == 0) a.agree_local("inner local work", [] {});
          const int32_t blocks = 64;
          if (inner == 1) a.allgather(&blocks, sizeof(blocks), "the block count");
          if (inner == 2) a.barrier("an inner barrier");
          a.agree(Status::Ok(), "symmetric buffer of 4096 bytes", "allocating symmetric memory");
        });
      } catch (const Error&) {
        a.agree(Status::Ok(), "the next plan", "the next plan");  // in step again
        throw;
      }
    });
    EXPECT_TRUE(result[1].code == ErrorCode::kInvalidArgument && has(result[1], "TPGEMM_SYMM_THREADS"))
        << "inner step " << inner << ": " << result[1].message;
    for (int r : {0, 2})
      EXPECT_TRUE(result[r].code == ErrorCode::kPeerFailure && has(result[r], "rank 1 failed") &&
                  has(result[r], "TPGEMM_SYMM_THREADS"))
          << "inner step " << inner << ", rank " << r << ": " << result[r].message;
  }
}

// The measured planners' pattern (ops/plan.cpp, AllReducePlan): the timing runs under one
// agree_local, and a failure there makes every rank fall back to the rules and go on to build the
// plan together. Rank 1 fails alone between two of the timing's exchanges (NCCL's asynchronous
// error that its check finds, say) while its peers wait in the next one: every rank must come
// out of the timing with the agreed error, then all build in step.
TEST(Agreement, AFailedTimingOnOneRankSendsEveryRankToTheRulesInStep) {
  for (int fail_at = 0; fail_at < 2; ++fail_at) {
    std::vector<int> fell_back(3, 0);
    const auto result = on_ranks(3, [&](int rank, Agreement& a) {
      a.agree_local("making the plan", [&] {
        try {
          a.agree_local("tuning the plan", [&] {
            const double budget = 1000;
            a.allgather(&budget, sizeof(budget), "the planner's budget");
            for (int candidate = 0; candidate < 2; ++candidate) {
              if (rank == 1 && candidate == fail_at) throw Error(ErrorCode::kNcclError, "asynchronous error on rank 1");
              const float ms = 0.5f;
              a.allgather(&ms, sizeof(ms), "the planner's timings");
            }
          });
        } catch (const AgreedError&) {
          fell_back[rank] = 1;  // the rules decide, on every rank alike
        }
        a.agree_local("building the plan", [&] { a.barrier("a symmetric allocation"); });
      });
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_TRUE(result[r].ok()) << "failure at candidate " << fail_at << ", rank " << r << ": " << result[r].message;
      EXPECT_EQ(fell_back[r], 1) << "failure at candidate " << fail_at << ", rank " << r;
    }
  }
}

TEST(Agreement, AnExceptionOfAnotherKindIsAgreedOnAsInternal) {
  const auto result = on_ranks(2, [](int rank, Agreement& a) {
    a.agree_local("allocating host memory", [&] {
      if (rank == 0) throw std::bad_alloc();
    });
  });
  EXPECT_TRUE(result[0].code == ErrorCode::kInternal && has(result[0], "allocating host memory")) << result[0].message;
  EXPECT_TRUE(result[1].code == ErrorCode::kPeerFailure && has(result[1], "rank 0 failed")) << result[1].message;
}

// The bounded poll behind the exchange's wait and NCCL's initialisation: true as soon as the
// condition holds (checked before the deadline is), false once the deadline has passed, and never
// long after it.
TEST(PollUntil, EndsWhenDoneOrAtTheDeadline) {
  using Clock = std::chrono::steady_clock;
  int polls = 0;
  EXPECT_TRUE(poll_until(Clock::now() - std::chrono::seconds(1), [&] { return ++polls > 0; }));
  EXPECT_EQ(polls, 1) << "a condition that holds wins over a deadline already passed";
  polls = 0;
  EXPECT_TRUE(poll_until(Clock::now() + std::chrono::seconds(10), [&] { return ++polls == 3000; }));
  EXPECT_EQ(polls, 3000);
  const auto t0 = Clock::now();
  EXPECT_FALSE(poll_until(t0 + std::chrono::milliseconds(50), [] { return false; }));
  const auto waited = Clock::now() - t0;
  EXPECT_GE(waited, std::chrono::milliseconds(50));
  EXPECT_LT(waited, std::chrono::seconds(2));
}

}  // namespace
}  // namespace tpgemm::comm
