// Which calls of a plan are worth a graph: the bookkeeping of NOTE [call graphs], host-only (no
// CUDA), so that its policy is tested without a GPU (tests/unit/test_replay_cache.cpp). One
// cache per implementation of a plan (a plan called at several M may have one per range of M).
//
// A model calls one plan from every layer of its shape, each layer at addresses of its own (its
// weight, its activations), and repeats the sequence every step: the cache keeps a graph per key
// for a few hundred keys, so a model of a hundred-odd layers finds every one of its calls again
// on the next step. A key gets a graph when it is called again while it is among the last
// kWindow calls that ran directly (a key whose graph was evicted runs directly twice more).
//
// A capture costs a direct call's enqueue and an instantiation, the savings of a few replays, so
// where more keys recur than graphs are kept, captures must not evict graphs that replay for
// ones that never will. The graph evicted is the least recently used of the first of: those
// unused for kEpoch calls (a phase of the program that ended), those not yet replayed, all. A key
// whose graph was evicted before its first replay is not captured again for kEpoch calls, twice
// as many each time that happens again (up to 2^kMaxBackoff epochs; forgotten after as long a
// quiet): an evaluation between training steps, say, runs directly and leaves the training's
// graphs alone, and a pattern wider than the cache keeps kGraphs of its keys replaying and
// captures ever fewer of the others.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tpgemm::detail {

struct CallKey {
  std::array<const void*, 7> ptrs{};  // A, B, C, D, A gathered, a_scale, b_scale
  int64_t m = 0;
  bool operator==(const CallKey&) const = default;
};

struct CallKeyHash {
  size_t operator()(const CallKey& k) const {
    size_t h = std::hash<int64_t>()(k.m);
    for (const void* p : k.ptrs) h = h * 0x9E3779B97F4A7C15ull + std::hash<const void*>()(p);
    return h;
  }
};

template <class Graph>
class ReplayCache {
 public:
  static constexpr size_t kGraphs = 256;   // graphs kept
  static constexpr size_t kWindow = 1024;  // direct calls remembered
  static constexpr uint64_t kEpoch = 4096;  // calls
  static constexpr uint32_t kMaxBackoff = 6;

  // The graph of `key`, counted as replayed, or nullptr. Every call asks this first.
  Graph* find(const CallKey& key) {
    if (++clock_ >= next_purge_) {
      std::erase_if(futile_, [&](const auto& e) { return clock_ >= e.second.until + e.second.wait(); });
      next_purge_ = clock_ + kEpoch;
    }
    const auto it = graphs_.find(key);
    if (it == graphs_.end()) return nullptr;
    it->second.used = clock_;
    ++it->second.replays;
    ++replays_;
    return &it->second.graph;
  }

  // After find() gave nullptr: whether to capture `key` now (then add() its graph); if not, the
  // call runs directly and is remembered.
  bool should_capture(const CallKey& key) {
    const auto f = futile_.find(key);
    const bool futile = f != futile_.end() && clock_ < f->second.until;
    const auto it = seen_.find(key);
    if (it != seen_.end() && !futile) {
      seen_.erase(it);  // its ring slot stays, and finds another key (or none) when it expires
      return true;
    }
    remember(key);
    return false;
  }

  // The graph captured for `key`, which is now launched once (not a replay).
  Graph& add(const CallKey& key, Graph graph) {
    if (graphs_.size() >= kGraphs) evict();
    ++captures_;
    return graphs_.insert_or_assign(key, Entry{std::move(graph), clock_, 0}).first->second.graph;
  }

  void clear() { graphs_.clear(); }
  size_t graphs() const { return graphs_.size(); }
  size_t remembered() const { return seen_.size(); }
  uint64_t captures() const { return captures_; }
  uint64_t replays() const { return replays_; }

 private:
  struct Entry {
    Graph graph{};
    uint64_t used = 0;  // the clock of its capture or last replay
    uint64_t replays = 0;
  };
  struct Futile {
    uint64_t until = 0;  // the clock up to which the key is not captured
    uint32_t times = 0;  // its graphs that went unreplayed, up to kMaxBackoff
    uint64_t wait() const { return kEpoch << (times - 1); }  // calls, from the last such eviction
  };
  struct Slot {
    CallKey key;
    uint64_t seq = 0;  // 0: empty
  };

  void evict() {
    const auto order = [&](const auto& e) {
      const int cls = clock_ - e.second.used >= kEpoch ? 0 : e.second.replays == 0 ? 1 : 2;
      return std::pair{cls, e.second.used};
    };
    const auto victim = std::min_element(graphs_.begin(), graphs_.end(),
                                         [&](const auto& a, const auto& b) { return order(a) < order(b); });
    if (victim->second.replays == 0) {
      Futile& f = futile_[victim->first];
      f.times = std::min(f.times + 1, kMaxBackoff);
      f.until = clock_ + f.wait();
    }
    graphs_.erase(victim);
  }

  void remember(const CallKey& key) {
    Slot& s = ring_[seq_ % kWindow];
    if (s.seq != 0) {  // the oldest direct call leaves the window, unless its key came again
      const auto old = seen_.find(s.key);
      if (old != seen_.end() && old->second == s.seq) seen_.erase(old);
    }
    s = Slot{key, ++seq_};
    seen_[key] = s.seq;
  }

  std::unordered_map<CallKey, Entry, CallKeyHash> graphs_;
  std::unordered_map<CallKey, uint64_t, CallKeyHash> seen_;    // key -> seq of its last direct run
  std::unordered_map<CallKey, Futile, CallKeyHash> futile_;    // keys whose graphs went unreplayed
  std::vector<Slot> ring_ = std::vector<Slot>(kWindow);        // the last kWindow direct runs
  uint64_t seq_ = 0, clock_ = 0, next_purge_ = kEpoch, captures_ = 0, replays_ = 0;
};

}  // namespace tpgemm::detail
