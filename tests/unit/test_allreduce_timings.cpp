// The measured all-reduce's table (plan/allreduce_timings.h): which sizes a plan times, which
// algorithms are still worth timing, the winner's tie rules and the routing of calls by the table.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "plan/allreduce_timings.h"

namespace tpgemm::plan {
namespace {

using Row = AllReduceTimings::Row;
constexpr AllReduceImpl kNccl = AllReduceImpl::kNccl, kOne = AllReduceImpl::kOneShot, kTwo = AllReduceImpl::kTwoShot;

Row row(float nccl, float one, float two) {
  Row r;
  r.ms[0] = nccl, r.ms[1] = one, r.ms[2] = two;
  r.winner = winner_of(r.ms);
  return r;
}

TEST(AllReduceTimings, SizesArePowersOfTwoUpToTheMessageNotYetTimed) {
  AllReduceTimings t;
  EXPECT_EQ(sizes_to_time(t, 1), (std::vector<int64_t>{4096}));
  EXPECT_EQ(sizes_to_time(t, 4096), (std::vector<int64_t>{4096}));
  EXPECT_EQ(sizes_to_time(t, 20000), (std::vector<int64_t>{4096, 8192, 16384, 32768}));  // rounded up
  t.rows[4096] = row(1, 1, 1);
  t.rows[8192] = row(1, 1, 1);
  EXPECT_EQ(sizes_to_time(t, 20000), (std::vector<int64_t>{16384, 32768}));
  EXPECT_TRUE(sizes_to_time(t, 8000).empty());
  // At most kLargestTimedBytes, however large the message.
  const std::vector<int64_t> all = sizes_to_time({}, int64_t(1) << 40);
  EXPECT_EQ(all.back(), kLargestTimedBytes);
  EXPECT_EQ(all.size(), 17u);  // 4 KiB .. 256 MiB
}

TEST(AllReduceTimings, WinnerTiesKeepNcclWithinTwoPercentAndOneShotWithinOne) {
  EXPECT_EQ(winner_of(row(1.0f, 0.985f, 2.0f).ms), kNccl);  // 1.5% faster: not enough against NCCL
  EXPECT_EQ(winner_of(row(1.0f, 0.97f, 2.0f).ms), kOne);
  EXPECT_EQ(winner_of(row(1.0f, 0.5f, 0.496f).ms), kOne);   // 0.8% faster than one-shot: a tie
  EXPECT_EQ(winner_of(row(1.0f, 0.5f, 0.49f).ms), kTwo);
  EXPECT_EQ(winner_of(row(1.0f, -1, 0.9f).ms), kTwo);       // one-shot not timed
  EXPECT_EQ(winner_of(row(-1, 0.5f, 0.4f).ms), kTwo);       // NCCL failed
  EXPECT_EQ(winner_of(row(-1, -1, -1).ms), kNccl);          // nothing timed: NCCL
}

TEST(AllReduceTimings, AnAlgorithmBehindNcclTwoSizesInARowIsNotTimedFurther) {
  AllReduceTimings t;
  EXPECT_TRUE(worth_timing(t, kOne, 4096));
  EXPECT_TRUE(worth_timing(t, kOne, 8192));  // fewer than two sizes below
  // One-shot wins the smallest sizes: two-shot, behind it but ahead of NCCL, stays in.
  t.rows[4096] = row(3, 1, 2);
  t.rows[8192] = row(3, 1, 2);
  EXPECT_TRUE(worth_timing(t, kTwo, 16384));
  t.rows[16384] = row(3, 2, 1);                // two-shot's turn
  t.rows[32768] = row(3, 3.5f, 1);             // one-shot behind NCCL once
  EXPECT_TRUE(worth_timing(t, kOne, 65536));
  t.rows[65536] = row(3, 4, 1);                // and twice
  EXPECT_FALSE(worth_timing(t, kOne, 131072));
  EXPECT_TRUE(worth_timing(t, kTwo, 131072));
  t.rows[131072] = row(3, -1, 1);              // one-shot not timed
  EXPECT_FALSE(worth_timing(t, kOne, 262144)); // stays out
  t.rows[262144] = row(1, -1, 2);              // NCCL ahead of two-shot
  EXPECT_TRUE(worth_timing(t, kTwo, 524288));
  t.rows[524288] = row(1, -1, 1);              // a tie counts as behind
  EXPECT_FALSE(worth_timing(t, kTwo, 1048576));
  EXPECT_TRUE(worth_timing(t, kNccl, 1048576));  // NCCL always
  // Where NCCL was not timed (it failed), nothing is behind it.
  AllReduceTimings f;
  f.rows[4096] = row(-1, 2, 3);
  f.rows[8192] = row(-1, 2, 3);
  EXPECT_TRUE(worth_timing(f, kTwo, 16384));
}

TEST(AllReduceTimings, RoutesACallToTheSmallestTimedSizeAtOrAboveIt) {
  AllReduceTimings t;
  t.rows[4096] = row(3, 1, 2);
  t.rows[8192] = row(3, 2, 1);
  t.rows[16384] = row(1, 2, 3);
  EXPECT_EQ(route(t, 16), kOne);
  EXPECT_EQ(route(t, 4096), kOne);
  EXPECT_EQ(route(t, 4097), kTwo);
  EXPECT_EQ(route(t, 16384), kNccl);
  EXPECT_EQ(route(t, int64_t(1) << 30), kNccl);  // past the table
  EXPECT_EQ(largest_routed(t, kOne, int64_t(1) << 30), 4096);
  EXPECT_EQ(largest_routed(t, kOne, 1000), 1000);  // at most the plan's message
  EXPECT_EQ(largest_routed(t, kTwo, int64_t(1) << 30), 8192);
  EXPECT_EQ(largest_routed(t, kTwo, 4096), 0);     // no call of the plan reaches it
  EXPECT_EQ(largest_routed(t, kNccl, int64_t(1) << 30), int64_t(1) << 30);
  EXPECT_EQ(largest_routed(t, kNccl, 8192), 0);
  // Past the table NCCL, whatever the last size's winner: the symmetric kernels' staging stops there.
  t.rows[32768] = row(2, 3, 1);
  EXPECT_EQ(route(t, 32768), kTwo);
  EXPECT_EQ(route(t, 32769), kNccl);
  EXPECT_EQ(largest_routed(t, kTwo, int64_t(1) << 30), 32768);
  EXPECT_EQ(largest_routed(t, kNccl, 20000), 16384);
  EXPECT_EQ(largest_routed(t, kNccl, 40000), 40000);
}

// Every call a plan routes to an algorithm fits the staging made for that algorithm's largest call,
// on random tables and plan sizes.
TEST(AllReduceTimings, EveryRoutedCallFitsItsAlgorithmsLargest) {
  std::mt19937_64 rng(20261207);
  for (int trial = 0; trial < 300; ++trial) {
    AllReduceTimings t;
    const int sizes = 1 + static_cast<int>(rng() % 15);
    for (int i = 0; i < sizes; ++i) {
      std::uniform_real_distribution<float> u(0.5f, 1.5f);
      t.rows[kSmallestTimedBytes << i] = row(u(rng), rng() % 4 ? u(rng) : -1.0f, u(rng));
    }
    const int64_t message = 16 + static_cast<int64_t>(rng() % (int64_t(1) << 28)) / 16 * 16;
    for (int c = 0; c < 200; ++c) {
      const int64_t bytes = 16 * (1 + static_cast<int64_t>(rng() % (message / 16)));
      const AllReduceImpl a = route(t, bytes);
      ASSERT_LE(bytes, largest_routed(t, a, message)) << "trial " << trial << ": " << bytes << " bytes of a "
                                                      << message << "-byte plan";
    }
  }
}

TEST(AllReduceTimings, DescribeListsEverySizeUpToThePlans) {
  AllReduceTimings t;
  t.rows[4096] = row(0.01f, 0.003f, 0.005f);
  t.rows[8192] = row(0.01f, -1, 0.005f);
  t.rows[16384] = row(0.01f, -1, 0.02f);
  EXPECT_EQ(describe(t, 5000), "4096 B: nccl 0.0100 oneshot 0.0030 twoshot 0.0050 -> oneshot; "
                               "8192 B: nccl 0.0100 oneshot - twoshot 0.0050 -> twoshot");
}

}  // namespace
}  // namespace tpgemm::plan
