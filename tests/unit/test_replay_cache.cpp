// NOTE [call graphs]: which calls get a graph (src/ops/replay_cache.h), host-only; the graphs
// themselves are checked on GPUs (tests/dist/test_call_graphs.cpp).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "ops/replay_cache.h"

namespace tpgemm::detail {
namespace {

using Cache = ReplayCache<int>;

CallKey key(uintptr_t i, int64_t m = 64) {
  CallKey k;
  k.ptrs[0] = reinterpret_cast<const void*>(0x10000 * (i + 1));
  k.ptrs[1] = reinterpret_cast<const void*>(0x10000 * (i + 1) + 0x1000);
  k.m = m;
  return k;
}

enum Way { kDirect, kCaptured, kReplayed };

Way call(Cache& c, const CallKey& k) {
  if (c.find(k) != nullptr) return kReplayed;
  if (!c.should_capture(k)) return kDirect;
  c.add(k, 0);
  return kCaptured;
}

// How many calls of keys [first, first + n) went each way, in order.
std::array<int, 3> step(Cache& c, uintptr_t first, int n) {
  std::array<int, 3> ways{};
  for (int i = 0; i < n; ++i) ++ways[call(c, key(first + i))];
  return ways;
}

using Ways = std::array<int, 3>;

TEST(ReplayCache, SecondSightingCapturesThenReplays) {
  Cache c;
  EXPECT_EQ(call(c, key(1)), kDirect);
  EXPECT_EQ(call(c, key(2)), kDirect);
  EXPECT_EQ(call(c, key(1)), kCaptured);
  EXPECT_EQ(call(c, key(2)), kCaptured);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(call(c, key(1)), kReplayed);
    EXPECT_EQ(call(c, key(2)), kReplayed);
  }
  EXPECT_EQ(c.captures(), 2u);
  EXPECT_EQ(c.replays(), 10u);
}

TEST(ReplayCache, AnotherMIsAnotherCall) {
  Cache c;
  EXPECT_EQ(call(c, key(1, 64)), kDirect);
  EXPECT_EQ(call(c, key(1, 128)), kDirect);
  EXPECT_EQ(call(c, key(1, 64)), kCaptured);
  EXPECT_EQ(call(c, key(1, 128)), kCaptured);
  EXPECT_EQ(c.graphs(), 2u);
}

// A plan called from every layer of a deep model, each layer at its own addresses: the first
// step runs directly, the second captures every call, every later one replays them all.
TEST(ReplayCache, EveryLayerOfADeepModelReplaysFromTheThirdStep) {
  Cache c;
  const int layers = 2 * 126;  // two calls per layer of a 126-layer model
  EXPECT_EQ(step(c, 0, layers), (Ways{layers, 0, 0}));
  EXPECT_EQ(step(c, 0, layers), (Ways{0, layers, 0}));
  for (int s = 0; s < 40; ++s) ASSERT_EQ(step(c, 0, layers), (Ways{0, 0, layers})) << "step " << s;
  EXPECT_EQ(c.captures(), static_cast<uint64_t>(layers));
}

// A key is captured when it comes again while among the last kWindow direct calls, not after.
TEST(ReplayCache, TheWindowIsTheLastDirectCalls) {
  Cache c;
  EXPECT_EQ(call(c, key(0)), kDirect);
  EXPECT_EQ(step(c, 1000, Cache::kWindow - 1)[kDirect], static_cast<int>(Cache::kWindow - 1));
  EXPECT_EQ(call(c, key(0)), kCaptured);
  EXPECT_EQ(call(c, key(1)), kDirect);
  EXPECT_EQ(step(c, 5000, Cache::kWindow)[kDirect], static_cast<int>(Cache::kWindow));
  EXPECT_EQ(call(c, key(1)), kDirect);
  EXPECT_EQ(call(c, key(1)), kCaptured);
}

// A key that recurs every 600 calls amid fresh addresses is found again every time, however long
// the run, and what is remembered stays bounded.
TEST(ReplayCache, ARecurringKeyAmidFreshAddressesIsFound) {
  Cache c;
  uintptr_t fresh = 100000;
  for (int round = 0; round < 10; ++round) {
    const CallKey k = key(round);
    EXPECT_EQ(call(c, k), kDirect);
    for (int i = 0; i < 600; ++i) ASSERT_EQ(call(c, key(fresh++)), kDirect);
    EXPECT_EQ(call(c, k), kCaptured) << "round " << round;
    EXPECT_LE(c.remembered(), Cache::kWindow);
  }
}

// Among graphs that have replayed, the least recently used is the one evicted.
TEST(ReplayCache, EvictsTheLeastRecentlyUsed) {
  Cache c;
  const int n = static_cast<int>(Cache::kGraphs);
  step(c, 0, n);
  EXPECT_EQ(step(c, 0, n), (Ways{0, n, 0}));
  EXPECT_EQ(step(c, 0, n), (Ways{0, 0, n}));
  EXPECT_EQ(call(c, key(0)), kReplayed);
  EXPECT_EQ(call(c, key(n)), kDirect);
  EXPECT_EQ(call(c, key(n)), kCaptured);  // evicts key(1), the least recently used
  EXPECT_EQ(c.graphs(), Cache::kGraphs);
  EXPECT_EQ(call(c, key(0)), kReplayed);
  EXPECT_EQ(call(c, key(2)), kReplayed);
  EXPECT_EQ(call(c, key(n)), kReplayed);
  EXPECT_EQ(call(c, key(1)), kDirect);
}

// Graphs not yet replayed go before graphs that have, however recently they were captured.
TEST(ReplayCache, EvictsAGraphNotYetReplayedFirst) {
  Cache c;
  const int n = static_cast<int>(Cache::kGraphs);
  step(c, 0, n - 1);
  step(c, 0, n - 1);
  EXPECT_EQ(step(c, 0, n - 1), (Ways{0, 0, n - 1}));
  EXPECT_EQ(step(c, 1000, 2), (Ways{2, 0, 0}));
  EXPECT_EQ(step(c, 1000, 2), (Ways{0, 2, 0}));  // the second evicts the first, not yet replayed
  EXPECT_EQ(step(c, 0, n - 1), (Ways{0, 0, n - 1}));
  EXPECT_EQ(call(c, key(1001)), kReplayed);
  EXPECT_EQ(call(c, key(1000)), kDirect);  // and is not captured again for a while
  EXPECT_EQ(call(c, key(1000)), kDirect);
}

// More keys recur than graphs are kept: kGraphs of them keep replaying, and the others are
// captured ever more seldom, so that captures stay a small share of the calls.
TEST(ReplayCache, AWiderPatternKeepsGraphsReplayingAndCapturesFew) {
  for (int keys : {300, 400, 800, 1000}) {
    Cache c;
    Ways total{};
    const int steps = 300;
    for (int s = 0; s < steps; ++s) {
      const Ways w = step(c, 0, keys);
      for (int i = 0; i < 3; ++i) total[i] += w[i];
    }
    const double calls = static_cast<double>(steps) * keys;
    EXPECT_LT(total[kCaptured] / calls, 0.03) << keys << " keys";
    EXPECT_GT(total[kReplayed] / calls, 0.9 * Cache::kGraphs / keys) << keys << " keys";
  }
}

// Evaluation between training steps, at addresses of its own: the training graphs, once they
// have replayed, stay and replay on its return.
TEST(ReplayCache, APhaseChangeKeepsTheGraphsThatReplay) {
  Cache c;
  const int n = 252;
  for (int s = 0; s < 3; ++s) step(c, 0, n);
  for (int round = 0; round < 30; ++round) {
    for (int s = 0; s < 2; ++s) step(c, 10000, n);  // evaluation
    EXPECT_GE(step(c, 0, n)[kReplayed], n - 4) << "round " << round;
    step(c, 0, n);
    for (int s = 0; s < 2; ++s) EXPECT_EQ(step(c, 0, n)[kReplayed], n) << "round " << round;
  }
}

// A phase that ends for good leaves its graphs behind: the next one gets its own.
TEST(ReplayCache, ANewPhaseGetsItsGraphs) {
  for (int before : {252, 900}) {
    Cache c;
    for (int s = 0; s < 50; ++s) step(c, 0, before);
    int s = 0;
    while (s < 60 && step(c, 50000, 252)[kReplayed] < 252) ++s;
    EXPECT_LT(s, 60) << "after a pattern of " << before << " keys";
  }
}

// A program whose addresses never repeat runs every call directly and remembers a bounded set.
TEST(ReplayCache, FreshAddressesRunDirectlyAndStayBounded) {
  Cache c;
  EXPECT_EQ(step(c, 0, 20000), (Ways{20000, 0, 0}));
  EXPECT_EQ(c.captures(), 0u);
  EXPECT_LE(c.remembered(), Cache::kWindow);
}

}  // namespace
}  // namespace tpgemm::detail
