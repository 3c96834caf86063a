// A CPU model of the symmetric collectives' protocol, one-shot, two-shot, reduce-scatter (two-shot's
// first round), all-gather and the fused GEMM+AllReduce's tile all-reduce (NOTE [empty lanes],
// NOTE [two staging halves], NOTE [tile all-reduce]): W ranks x B
// blocks as threads, calls back to back with nothing between them but each rank's stream
// order, random delays everywhere. Every call must read exactly the data its peers sent in that
// call. With one staging half instead of two, one-shot and reduce-scatter must fail (that is
// what their second half is for); two-shot, whose rounds form a handshake, does not need it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/format.h"

namespace tpgemm {
namespace {

struct ModelOptions {
  int world = 4, blocks = 3, lanes_per_block = 5, calls = 30, halves = 2;
  uint64_t seed = 1;
  // Each call moves its own count, at most the capacity, the same on every rank (NOTE [staging by
  // capacity]): the slots stay laid out for the capacity, and a block keeps its lanes.
  bool vary_count = false;
};

// Lanes call e moves of a message whose capacity is `n` lanes, a multiple of `unit`.
int lanes_in_call(const ModelOptions& o, int n, int e, int unit = 1) {
  if (!o.vary_count) return n;
  return unit * (1 + static_cast<int>((o.seed * 7907 + static_cast<uint64_t>(e) * 104729) % static_cast<uint64_t>(n / unit)));
}

// A block runs in the calls where it has lanes of its own (`units(e)`: the lanes a block's
// places range over in call e), as the kernels are launched. Its call number, which picks the
// staging half, counts the calls it ran in. 0: it does not run in call e.
template <typename Units>
int block_call(const ModelOptions& o, int b, int e, const Units& units) {
  const auto runs = [&](int call) { return b * o.lanes_per_block < units(call); };
  if (!runs(e)) return 0;
  int n = 0;
  for (int call = 1; call <= e; ++call) n += runs(call) ? 1 : 0;
  return n;
}

using Lane = std::atomic<uint16_t>;

// What the threads share: the staging buffers, the first error, and how to wait on a lane.
class Model {
 public:
  Model(const ModelOptions& o, size_t half_lanes) : o_(o), half_(half_lanes) {
    for (int r = 0; r < o.world; ++r) stage_.emplace_back(o.halves * half_lanes);  // zero: empty
  }
  // Lane `i` of rank r's staging half for call e.
  Lane& lane(int r, int e, size_t i) { return stage_[r][static_cast<size_t>(e % o_.halves) * half_ + i]; }
  bool failed() const { return failed_; }
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = why;
    failed_ = true;
  }
  // Waits until the lane is filled, takes its value and empties it; false if it must be `want`
  // and is not, or never fills (the model failed).
  bool take(Lane& l, uint16_t want, const std::string& what) {
    const auto t0 = std::chrono::steady_clock::now();
    uint16_t v;
    while ((v = l.load()) == 0) {
      if (failed_) return false;
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(2)) {
        fail(what + ": never filled (deadlock)");
        return false;
      }
      std::this_thread::yield();
    }
    l.store(0);
    if (v != want) fail(strfmt("%s: holds %u, sent in another call (expected %u)", what.c_str(), v, want));
    return v == want;
  }
  // Runs call(r, b, e, jitter) for every rank r, block b and call e = 1..calls, each rank's calls
  // in stream order (its next call starts once all its blocks ended the previous one).
  template <typename Call>
  std::string run(const Call& call) {
    std::vector<std::unique_ptr<std::barrier<>>> stream_order;
    for (int r = 0; r < o_.world; ++r) stream_order.push_back(std::make_unique<std::barrier<>>(o_.blocks));
    std::vector<std::thread> threads;
    for (int r = 0; r < o_.world; ++r)
      for (int b = 0; b < o_.blocks; ++b)
        threads.emplace_back([&, r, b] {
          std::mt19937_64 rng(o_.seed * 1000003 + r * 101 + b);
          const auto jitter = [&] {
            if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 50));
          };
          for (int e = 1; e <= o_.calls; ++e) {
            if (!call(r, b, e, jitter) || failed_) break;
            stream_order[r]->arrive_and_wait();
          }
          stream_order[r]->arrive_and_drop();  // blocks of this rank still waiting go on (and see the failure)
        });
    for (auto& t : threads) t.join();
    return error_;
  }

 private:
  ModelOptions o_;
  size_t half_;
  std::vector<std::vector<Lane>> stage_;
  std::mutex mu_;
  std::string error_;
  std::atomic<bool> failed_{false};
};

// The value rank q sends for lane i in call e, and a sum's stand-in: never 0 (empty).
uint16_t sent(int q, int e, int i) { return static_cast<uint16_t>(1 + (q * 7919 + e * 131 + i * 17) % 65000); }
uint16_t reduced(int e, int i) { return static_cast<uint16_t>(1 + (e * 257 + i * 31) % 65000); }

// One-shot (own_slot) and all-gather (not): block b of rank r stores its lanes into slot r of
// every rank's staging half (all-gather: every peer's), then takes the lanes of every slot of
// its own half (all-gather: every peer's slot). Returns "" or the first error.
std::string run_slots_model(const ModelOptions& o, bool own_slot) {
  const int n = o.blocks * o.lanes_per_block;  // lanes of one rank's message (the capacity)
  Model m(o, static_cast<size_t>(o.world) * n);
  return m.run([&](int r, int b, int call, auto& jitter) {
    const auto units = [&](int c) { return lanes_in_call(o, n, c); };
    const int e = block_call(o, b, call, units);
    if (e == 0) return true;
    const int lanes = std::min(o.lanes_per_block, units(call) - b * o.lanes_per_block);
    for (int j = 0; j < lanes; ++j)
      for (int q = 0; q < o.world; ++q) {
        jitter();
        const int i = b * o.lanes_per_block + j;
        if (own_slot || q != r) m.lane(q, e, static_cast<size_t>(r) * n + i).store(sent(r, e, i));
      }
    const auto take = [&](int q, int j) {
      jitter();
      const int i = b * o.lanes_per_block + j;
      return m.take(m.lane(r, e, static_cast<size_t>(q) * n + i), sent(q, e, i),
                    strfmt("rank %d block %d call %d: lane %d from rank %d", r, b, e, i, q));
    };
    // As the kernels read: one-shot sums every slot of a lane at once; the all-gather copies
    // out peer by peer.
    for (int j = 0; j < lanes && own_slot; ++j)
      for (int q = 0; q < o.world; ++q)
        if (!take(q, j)) return false;
    for (int q = 0; q < o.world && !own_slot; ++q)
      for (int j = 0; j < lanes && q != r; ++j)
        if (!take(q, j)) return false;
    return true;
  });
}
std::string run_oneshot_model(const ModelOptions& o) { return run_slots_model(o, true); }
std::string run_allgather_model(const ModelOptions& o) { return run_slots_model(o, false); }

// Two-shot: the message is W slices of up to `cap` lanes; block b handles the same places of
// every slice. It stores slice q's lanes into slot r of rank q's half (scatter), takes its own
// slice's lanes from every slot and stores their "sum" into every peer's gather area, then takes
// the other slices' lanes from its own gather area. Without `gather_round`, the reduce-scatter:
// the first round alone, and no gather area. A call of fewer lanes cuts its message into W
// shorter slices (as the kernel does), each still at its capacity's place.
std::string run_shots_model(const ModelOptions& o, bool gather_round) {
  const int cap = o.blocks * o.lanes_per_block;
  const size_t gather = static_cast<size_t>(o.world) * cap;  // after the W scatter slots
  Model m(o, gather + (gather_round ? static_cast<size_t>(o.world) * cap : 0));
  // The reduce-scatter's slices are equal (its count a multiple of W vectors); two-shot's not.
  const auto lanes = [&](int c) { return lanes_in_call(o, cap * o.world, c, gather_round ? 1 : o.world); };
  return m.run([&](int r, int b, int call, auto& jitter) {
    const int n = lanes(call), per = (n + o.world - 1) / o.world;
    const int e = block_call(o, b, call, [&](int c) { return (lanes(c) + o.world - 1) / o.world; });
    if (e == 0) return true;
    // Places of slice q in this call that block b handles: [first, end).
    const auto places = [&](int q) {
      const int len = std::max(0, std::min(n - q * per, per));
      return std::pair{b * o.lanes_per_block, std::min(len, (b + 1) * o.lanes_per_block)};
    };
    for (int q = 0; q < o.world; ++q)
      for (int k = places(q).first; k < places(q).second; ++k) {
        jitter();
        m.lane(q, e, static_cast<size_t>(r) * cap + k).store(sent(r, e, q * per + k));
      }
    for (int k = places(r).first; k < places(r).second; ++k) {
      const int i = r * per + k;
      for (int src = 0; src < o.world; ++src) {
        jitter();
        if (!m.take(m.lane(r, e, static_cast<size_t>(src) * cap + k), sent(src, e, i),
                    strfmt("rank %d block %d call %d: scatter lane %d from rank %d", r, b, e, i, src)))
          return false;
      }
      for (int q = 0; q < o.world && gather_round; ++q)
        if (q != r) m.lane(q, e, gather + static_cast<size_t>(r) * cap + k).store(reduced(e, i));
    }
    for (int q = 0; q < o.world && gather_round; ++q)
      for (int k = places(q).first; k < places(q).second && q != r; ++k) {
        jitter();
        const int i = q * per + k;
        if (!m.take(m.lane(r, e, gather + static_cast<size_t>(q) * cap + k), reduced(e, i),
                    strfmt("rank %d block %d call %d: gathered lane %d from rank %d", r, b, e, i, q)))
          return false;
      }
    return true;
  });
}
std::string run_twoshot_model(const ModelOptions& o) { return run_shots_model(o, true); }
std::string run_reducescatter_model(const ModelOptions& o) { return run_shots_model(o, false); }

// The fused GEMM+AllReduce's push-and-reduce kernel (NOTE [tile all-reduce]): units of
// lanes_per_block lanes, dealt to owners in turn (unit u's owner is u mod W), handed to a rank's
// blocks in order by a ticket counter (fetch-and-add; zero at the start of each call, as the
// kernel's is reset between calls). Ticket u < U: push unit u to its owner's slot r, or, if r
// owns it, take every slot's lanes and store their "sum" into every peer's gather area. Ticket
// U + u: take owner u mod W's sums of unit u from the gather area (nothing if r owns it). The
// slots alternate between halves; the gather area, as the kernel's, is one for every call.
// Blocks take what comes next, so a block may wait on a gather while others push: the order
// must not deadlock. With `gathers_first` (the gather tickets before the pushes) it must.
std::string run_tile_allreduce_model(const ModelOptions& o, bool gathers_first) {
  const int units = 3 * o.world, lanes = o.lanes_per_block;
  const size_t slot = static_cast<size_t>(units) * lanes, gather = static_cast<size_t>(o.world) * slot;
  Model m(o, gather + slot);
  const auto gathered = [&](int q, int i) -> Lane& { return m.lane(q, /*call: the first half's area*/ 0, gather + i); };
  std::vector<std::atomic<int64_t>> tickets(static_cast<size_t>(o.world) * (o.calls + 1));  // [rank][call]
  return m.run([&](int r, int b, int e, auto& jitter) {
    for (;;) {
      const int64_t t = tickets[static_cast<size_t>(r) * (o.calls + 1) + e].fetch_add(1);
      if (t >= 2 * units) return true;  // this call's tickets are all handed out
      const int u = static_cast<int>(t % units), owner = u % o.world;
      const bool gathering = (t >= units) != gathers_first;
      for (int j = 0; j < lanes; ++j) {
        jitter();
        const int i = u * lanes + j;
        const std::string at = strfmt("rank %d block %d call %d: unit %d lane %d", r, b, e, u, j);
        if (gathering) {
          if (owner != r && !m.take(gathered(r, i), reduced(e, i), at + " gathered from its owner"))
            return false;
        } else if (owner != r) {
          m.lane(owner, e, static_cast<size_t>(r) * slot + i).store(sent(r, e, i));
        } else {
          for (int q = 0; q < o.world; ++q)
            if (q != r && !m.take(m.lane(r, e, static_cast<size_t>(q) * slot + i), sent(q, e, i),
                                  at + strfmt(" pushed by rank %d", q)))
              return false;
          for (int q = 0; q < o.world; ++q)
            if (q != r) gathered(q, i).store(reduced(e, i));
        }
      }
    }
  });
}

std::string run_tile_allreduce_ordered(const ModelOptions& o) { return run_tile_allreduce_model(o, false); }

TEST(AllReduceProtocol, TwoHalvesKeepEveryCallsDataApart) {
  for (const auto& [name, model] : {std::pair{"one-shot", &run_oneshot_model}, std::pair{"two-shot", &run_twoshot_model},
                                    std::pair{"reduce-scatter", &run_reducescatter_model},
                                    std::pair{"all-gather", &run_allgather_model},
                                    std::pair{"tile all-reduce", &run_tile_allreduce_ordered}})
    for (int world : {2, 3, 4, 8})
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        ModelOptions o;
        o.world = world;
        o.seed = seed;
        EXPECT_EQ(model(o), "") << name << " W=" << world << " seed " << seed;
      }
}

TEST(AllReduceProtocol, CallsOfDifferentCountsKeepEveryCallsDataApart) {
  for (const auto& [name, model] : {std::pair{"one-shot", &run_oneshot_model}, std::pair{"two-shot", &run_twoshot_model},
                                    std::pair{"reduce-scatter", &run_reducescatter_model},
                                    std::pair{"all-gather", &run_allgather_model}})
    for (int world : {2, 3, 4, 8})
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        ModelOptions o;
        o.world = world;
        o.seed = seed;
        o.vary_count = true;
        EXPECT_EQ(model(o), "") << name << " W=" << world << " seed " << seed;
      }
}

TEST(AllReduceProtocolCanFail, OneShotAndReduceScatterWithOneHalfLetAFastPeerOverwriteDataNotYetRead) {
  for (const auto& [name, model] : {std::pair{"one-shot", &run_oneshot_model},
                                    std::pair{"reduce-scatter", &run_reducescatter_model}}) {
    std::string err;
    for (uint64_t seed = 1; seed <= 20 && err.empty(); ++seed) {
      ModelOptions o;
      o.halves = 1;
      o.seed = seed;
      err = model(o);
    }
    EXPECT_NE(err, "") << name << ": one staging half never failed: the model does not exercise the race";
  }
}

TEST(AllReduceProtocolCanFail, TileAllReduceWithItsGathersHandedOutFirstDeadlocks) {
  ModelOptions o;
  o.calls = 2;
  const std::string err = run_tile_allreduce_model(o, /*gathers_first=*/true);
  EXPECT_NE(err.find("deadlock"), std::string::npos) << "got: \"" << err << "\"";
}

// Two-shot's two rounds are a handshake: a peer stores into my scatter slot for call e + 1 only
// after it has gathered my call-e sums, which I send after taking its call-e scatter lanes;
// and into my gather area only after taking my call-(e + 1) scatter lanes. So one staging half
// is enough for it. (The kernel still uses two: halving its staging waits for a GPU run.)
TEST(AllReduceProtocol, TwoShotNeedsOnlyOneHalf) {
  for (int world : {2, 3, 4, 8})
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      ModelOptions o;
      o.world = world;
      o.halves = 1;
      o.seed = seed;
      EXPECT_EQ(run_twoshot_model(o), "") << "W=" << world << " seed " << seed;
    }
}

}  // namespace
}  // namespace tpgemm
