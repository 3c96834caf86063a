// NOTE [call graphs]: which calls get a graph (src/ops/replay_cache.h), host-only; the graphs
// themselves are checked on GPUs (tests/dist/test_call_graphs.cpp).
#include <gtest/gtest.h>

#include <cstdint>

#include "ops/replay_cache.h"

namespace tpgemm::detail {
namespace {

using Cache = ReplayCache<int>;

CallKey key(uintptr_t a, int64_t m = 64) {
  CallKey k;
  k.ptrs[0] = reinterpret_cast<const void*>(a);
  k.ptrs[1] = reinterpret_cast<const void*>(a + 0x1000);
  k.m = m;
  return k;
}

enum class Way { kDirect, kCaptured, kReplayed };

Way call(Cache& c, const CallKey& k) {
  if (c.find(k) != nullptr) return Way::kReplayed;
  if (!c.should_capture(k)) return Way::kDirect;
  c.add(k, 0);
  return Way::kCaptured;
}

TEST(ReplayCache, SecondSightingCapturesThenReplays) {
  Cache c;
  EXPECT_EQ(call(c, key(1)), Way::kDirect);
  EXPECT_EQ(call(c, key(2)), Way::kDirect);
  EXPECT_EQ(call(c, key(1)), Way::kCaptured);
  EXPECT_EQ(call(c, key(2)), Way::kCaptured);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(call(c, key(1)), Way::kReplayed);
    EXPECT_EQ(call(c, key(2)), Way::kReplayed);
  }
  EXPECT_EQ(c.captures(), 2u);
  EXPECT_EQ(c.replays(), 10u);
}

TEST(ReplayCache, AnotherMIsAnotherCall) {
  Cache c;
  EXPECT_EQ(call(c, key(1, 64)), Way::kDirect);
  EXPECT_EQ(call(c, key(1, 128)), Way::kDirect);
  EXPECT_EQ(call(c, key(1, 64)), Way::kCaptured);
  EXPECT_EQ(call(c, key(1, 128)), Way::kCaptured);
  EXPECT_EQ(c.graphs(), 2u);
}

// A plan called from every layer of a deep model, each layer at its own addresses: the first
// step runs directly, the second captures every call, every later one replays them all.
TEST(ReplayCache, EveryLayerOfADeepModelReplaysFromTheThirdStep) {
  Cache c;
  const int layers = 2 * 126;  // two calls per layer of a 126-layer model
  for (int step = 0; step < 5; ++step)
    for (int l = 0; l < layers; ++l) {
      const Way want = step == 0 ? Way::kDirect : step == 1 ? Way::kCaptured : Way::kReplayed;
      ASSERT_EQ(call(c, key(0x10000 * (l + 1))), want) << "step " << step << " layer " << l;
    }
  EXPECT_TRUE(c.capturing());
  EXPECT_EQ(c.captures(), static_cast<uint64_t>(layers));
}

TEST(ReplayCache, ASightingOutsideTheWindowRunsDirectly) {
  Cache c;
  EXPECT_EQ(call(c, key(1)), Way::kDirect);
  for (uint64_t i = 0; i < Cache::kWindow; ++i) EXPECT_EQ(call(c, key(0x100000 + 16 * i)), Way::kDirect);
  EXPECT_EQ(call(c, key(1)), Way::kDirect);
  EXPECT_EQ(call(c, key(1)), Way::kCaptured);
  EXPECT_LE(c.remembered(), 2 * Cache::kWindow + 1);  // the keys outside the window are forgotten
}

// More keys recur within the window than graphs are kept: graphs are evicted before their first
// replay, and once kTrialCaptures were wasted so, captures stop; the graphs kept still replay.
TEST(ReplayCache, CapturesStopWhereTheyAreEvictedUnreplayed) {
  Cache c;
  const int keys = Cache::kGraphs + 150;
  for (int step = 0; step < 4; ++step)
    for (int i = 0; i < keys; ++i) call(c, key(0x10000 * (i + 1)));
  EXPECT_FALSE(c.capturing());
  EXPECT_EQ(c.captures(), Cache::kGraphs + Cache::kTrialCaptures);
  EXPECT_EQ(c.graphs(), static_cast<size_t>(Cache::kGraphs));
  uint64_t replays = c.replays();
  int replayed = 0;
  for (int i = 0; i < keys; ++i) replayed += call(c, key(0x10000 * (i + 1))) == Way::kReplayed;
  EXPECT_EQ(replayed, Cache::kGraphs);
  EXPECT_EQ(c.replays(), replays + Cache::kGraphs);
  EXPECT_EQ(c.captures(), Cache::kGraphs + Cache::kTrialCaptures);
}

// A program whose addresses never repeat runs every call directly and remembers a bounded set.
TEST(ReplayCache, FreshAddressesRunDirectlyAndStayBounded) {
  Cache c;
  for (int i = 0; i < 20000; ++i) ASSERT_EQ(call(c, key(16 * (i + 1))), Way::kDirect);
  EXPECT_EQ(c.captures(), 0u);
  EXPECT_LE(c.remembered(), 2 * Cache::kWindow + 1);
}

}  // namespace
}  // namespace tpgemm::detail
