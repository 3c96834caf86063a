// A CPU model of the all-reduce kernels' protocol (NOTE [empty lanes], NOTE [two staging
// halves]): W ranks x B blocks as threads, calls back to back with nothing between them but each
// rank's stream order, random delays everywhere. Every call must read exactly the data its
// peers sent in that call. With one staging half instead of two, the model must fail: that is
// what the second half is for.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/format.h"

namespace tpgemm {
namespace {

struct ModelOptions {
  int world = 4, blocks = 3, lanes_per_block = 5, calls = 30, halves = 2;
  uint64_t seed = 1;
};

// The one-shot kernel's protocol: block b of rank r stores its lanes into slot r of every rank's
// staging half (call parity), then polls the lanes of every slot of its own half until none is
// empty (0), takes them and empties them. Returns "" or the first error.
std::string run_oneshot_model(const ModelOptions& o) {
  const int n = o.blocks * o.lanes_per_block;  // lanes of one rank's message
  const size_t half = static_cast<size_t>(o.world) * n;
  std::vector<std::vector<std::atomic<uint16_t>>> stage;
  for (int r = 0; r < o.world; ++r) stage.emplace_back(o.halves * half);  // zero: empty
  // The value rank q sends for lane i in call e: never 0 (empty).
  const auto sent = [](int q, int e, int i) { return static_cast<uint16_t>(1 + (q * 7919 + e * 131 + i * 17) % 65000); };
  std::mutex mu;
  std::string error;
  std::atomic<bool> failed{false};
  const auto fail = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.empty()) error = why;
    failed = true;
  };
  // Stream order: a rank's next call starts once all its blocks have ended the previous one.
  std::vector<std::unique_ptr<std::barrier<>>> stream_order;
  for (int r = 0; r < o.world; ++r) stream_order.push_back(std::make_unique<std::barrier<>>(o.blocks));

  const auto block = [&](int r, int b) {
    std::mt19937_64 rng(o.seed * 1000003 + r * 101 + b);
    const auto jitter = [&] {
      if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
    };
    // One call of this block; false once the model has failed (here or elsewhere).
    const auto one_call = [&](int e) {
      const size_t base = static_cast<size_t>(e % o.halves) * half;
      for (int j = 0; j < o.lanes_per_block; ++j) {
        const int i = b * o.lanes_per_block + j;
        for (int q = 0; q < o.world; ++q) {
          jitter();
          stage[q][base + static_cast<size_t>(r) * n + i].store(sent(r, e, i));
        }
      }
      for (int j = 0; j < o.lanes_per_block; ++j) {
        const int i = b * o.lanes_per_block + j;
        for (int q = 0; q < o.world; ++q) {
          jitter();
          std::atomic<uint16_t>& lane = stage[r][base + static_cast<size_t>(q) * n + i];
          const auto t0 = std::chrono::steady_clock::now();
          uint16_t v;
          while ((v = lane.load()) == 0) {
            if (failed) return false;
            if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(2)) {
              fail(strfmt("rank %d block %d call %d: lane %d of rank %d never filled (deadlock)", r, b, e, i, q));
              return false;
            }
            std::this_thread::yield();
          }
          lane.store(0);
          if (v != sent(q, e, i)) {
            fail(strfmt("rank %d block %d call %d: lane %d of rank %d holds %u, sent in another call (expected %u)", r, b,
                        e, i, q, v, sent(q, e, i)));
            return false;
          }
        }
      }
      return !failed;
    };
    for (int e = 1; e <= o.calls; ++e) {
      if (!one_call(e)) break;
      stream_order[r]->arrive_and_wait();
    }
    stream_order[r]->arrive_and_drop();  // blocks of this rank still waiting go on (and see `failed`)
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < o.world; ++r)
    for (int b = 0; b < o.blocks; ++b) threads.emplace_back(block, r, b);
  for (auto& t : threads) t.join();
  return error;
}

TEST(AllReduceProtocol, TwoHalvesKeepEveryCallsDataApart) {
  for (int world : {2, 3, 4, 8})
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      ModelOptions o;
      o.world = world;
      o.seed = seed;
      EXPECT_EQ(run_oneshot_model(o), "") << "W=" << world << " seed " << seed;
    }
}

TEST(AllReduceProtocolCanFail, OneHalfLetsAFastPeerOverwriteDataNotYetRead) {
  std::string err;
  for (uint64_t seed = 1; seed <= 20 && err.empty(); ++seed) {
    ModelOptions o;
    o.halves = 1;
    o.seed = seed;
    err = run_oneshot_model(o);
  }
  EXPECT_NE(err, "") << "one staging half never failed: the model does not exercise the race";
}

}  // namespace
}  // namespace tpgemm
