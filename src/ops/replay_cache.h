// Which calls of a plan are worth a graph: the bookkeeping of NOTE [call graphs], host-only (no
// CUDA), so that its policy is tested without a GPU (tests/unit/test_replay_cache.cpp).
//
// A model calls one plan from every layer of its shape, each layer at addresses of its own (its
// weight, its activations), and repeats the sequence every step: the cache keeps a graph per key
// for a few hundred keys, so a model of a hundred-odd layers finds every one of its calls again
// on the next step. A key gets a graph on its second sighting within the last kWindow calls. A
// capture costs an instantiation, several replays' savings: where graphs are evicted before they
// were ever replayed (addresses that recur, but too seldom for their graphs to stay kept), and
// kTrialCaptures were wasted so, while replays number fewer than kReplaysPerCapture per capture,
// captures stop for good; the graphs kept still replay.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>

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
  static constexpr int kGraphs = 256;        // graphs kept; the least recently used goes first
  static constexpr uint64_t kWindow = 1024;  // a second sighting within this many calls captures
  static constexpr uint64_t kTrialCaptures = 16;
  static constexpr uint64_t kReplaysPerCapture = 2;

  // The graph of `key`, counted as replayed, or nullptr. Every call asks this first.
  Graph* find(const CallKey& key) {
    ++clock_;
    const auto it = graphs_.find(key);
    if (it == graphs_.end()) return nullptr;
    it->second.used = clock_;
    ++it->second.replays;
    ++replays_;
    return &it->second.graph;
  }

  // After find() gave nullptr: whether to capture `key` now (then add() its graph), else the call
  // runs directly and is remembered as seen.
  bool should_capture(const CallKey& key) {
    const auto it = seen_.find(key);
    const bool again = it != seen_.end() && clock_ - it->second <= kWindow;
    if (again && capturing_ && wasted_ >= kTrialCaptures && replays_ < kReplaysPerCapture * captures_)
      capturing_ = false;
    if (again && capturing_) {
      seen_.erase(it);
      return true;
    }
    seen_[key] = clock_;
    if (seen_.size() > 2 * kWindow)  // forget the keys older than the window
      std::erase_if(seen_, [&](const auto& e) { return clock_ - e.second > kWindow; });
    return false;
  }

  // The graph captured for `key`, which is now launched once (not a replay).
  Graph& add(const CallKey& key, Graph graph) {
    ++captures_;
    if (static_cast<int>(graphs_.size()) >= kGraphs) {
      auto oldest = graphs_.begin();
      for (auto it = graphs_.begin(); it != graphs_.end(); ++it)
        if (it->second.used < oldest->second.used) oldest = it;
      if (oldest->second.replays == 0) ++wasted_;
      graphs_.erase(oldest);
    }
    return graphs_.insert_or_assign(key, Entry{std::move(graph), clock_, 0}).first->second.graph;
  }

  void clear() { graphs_.clear(); }
  bool capturing() const { return capturing_; }
  size_t graphs() const { return graphs_.size(); }
  size_t remembered() const { return seen_.size(); }
  uint64_t captures() const { return captures_; }
  uint64_t replays() const { return replays_; }

 private:
  struct Entry {
    Graph graph{};
    uint64_t used = 0;
    uint64_t replays = 0;
  };
  std::unordered_map<CallKey, Entry, CallKeyHash> graphs_;
  std::unordered_map<CallKey, uint64_t, CallKeyHash> seen_;  // key -> clock of its last direct run
  uint64_t clock_ = 0, captures_ = 0, replays_ = 0, wasted_ = 0;
  bool capturing_ = true;
};

}  // namespace tpgemm::detail
