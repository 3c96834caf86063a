// The planner's measurements kept on disk (NOTE [measured planner] in ops/tuner.h), so that a
// later process makes the same plan without timing it again. Pure host logic.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/choose.h"
#include "plan/problem.h"

namespace tpgemm::plan {

// What a measurement depends on: the GPU (its name and SM count), the team (W, NVLink peers), the
// NCCL and tpgemm versions, the problem, what the plan must serve (the gathered A, calls of any M)
// and the options that narrow its candidates. One line of text without tabs.
struct TuneContext {
  std::string device;  // cudaDeviceProp::name
  int nccl_version = 0;
  Topology topo;
  // The environment settings that change an implementation's protocol or schedule
  // (detail::protocol_settings(): " NAME=value" pairs, empty where none is set).
  std::string settings;
  // What else changes the timings and not the protocol: the cuBLASLt, CUDA runtime and driver
  // versions, and settings such as NCCL_ALGO or TPGEMM_SM90_CONFIG (detail::timing_context()).
  std::string timing;
};
// `candidates`: what the planner times for it (plan::candidates), as a digest: a tpgemm that times
// another set (a new implementation or knob, one more that takes any M) asks anew.
std::string tune_key(const TuneContext& ctx, const GemmProblem& p, const PlanOptions& options, bool any_m,
                     const std::vector<Choice>& candidates);

// A text file of lines "key<TAB>impl<TAB>chunks<TAB>comm_sms<TAB>matmul<TAB>detail" after a header
// line; the last line of a key wins. Processes that share the file (the jobs of one user, on one
// host or over a network file system) take an advisory lock (flock) around each read and write, for
// at most kLockWaitMs; a line is appended whole, and a file grown past kCompactBytes is rewritten
// with its newest keys (half as many bytes, at most kKeepKeys; a new file renamed over the old, so
// that no reader sees half of it). A line that does not parse, or a file of another format, is skipped with a warning, never
// trusted; a newer tpgemm's file is left alone.
class TuneCache {
 public:
  // TPGEMM_TUNE_CACHE: a file path, or "off"; unset: $XDG_CACHE_HOME/tpgemm/tune-cache.txt, else
  // $HOME/.cache/tpgemm/tune-cache.txt; "" (off) when neither variable is set.
  static std::string default_path();

  static constexpr int kLockWaitMs = 2000;
  static constexpr long kCompactBytes = 1 << 20;
  static constexpr size_t kKeepKeys = 1000;

  explicit TuneCache(std::string path) : path_(std::move(path)) {}
  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // The choice stored for `key`, if any. Warnings (a foreign or corrupt file, unreadable lines)
  // are appended to `warnings`.
  std::optional<Choice> find(const std::string& key, std::vector<std::string>& warnings) const;
  // Appends the line; a failure to write (or to lock the file in time) is a warning, not an error:
  // the plan stands.
  void store(const std::string& key, const Choice& choice, const std::string& detail,
             std::vector<std::string>& warnings) const;

 private:
  std::string path_;
};

}  // namespace tpgemm::plan
