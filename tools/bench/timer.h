// How tpgemm-bench times calls, and the ranks' agreement on what it measured (collective: every
// rank makes the same calls in the same order).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "bench/cli.h"
#include "comm/start_line.h"
#include "comm/team_state.h"
#include "tpgemm/team.h"

namespace tpgemm::bench {

class Timer {
 public:
  // Times on `stream`, which outlives the timer.
  Timer(const BenchConfig& cfg, const Team& team, cudaStream_t stream);

  // The maximum of v over ranks; whether v holds on every rank.
  double max_over_ranks(double v);
  bool all_ranks(bool v);

  // `fn`'s time per call (time_interleaved_ms), by --timing or by `timing`.
  double time_ms(const std::function<void()>& fn);
  double time_ms(const std::function<void()>& fn, BenchConfig::Timing timing);

  // Each of `fns`'s time per call, timed by `timing` (--timing where not given), after its warm-up
  // runs; medians over samples, maximum over ranks:
  //   kSync   one call per sample between two events, waited for (as the torch peers time);
  //   kBatch  --iterations calls back to back per sample, nccl-tests' method: the host's enqueue
  //           overlaps the GPU's work, so neither adds to a call of a few microseconds nor makes
  //           it jitter;
  //   kGraph  the same calls captured in one CUDA graph and replayed (as inference stacks run
  //           decode steps): no host work per call at all, the GPU's own time.
  // The functions are timed in turn, one sample of each per round: a drift of the GPU over the
  // measurement (a hot GPU slows down, clocks move) then weighs on all of them alike, and a
  // ratio between two of them compares neighbours.
  std::vector<double> time_interleaved_ms(const std::vector<std::function<void()>>& fns);
  std::vector<double> time_interleaved_ms(const std::vector<std::function<void()>>& fns, BenchConfig::Timing timing);

 private:
  // `fn` enqueued between two events on the stream, after the start line (NOTE [start line]),
  // waited for: the time between them in ms.
  float event_ms(const Event& start, const Event& stop, const std::function<void()>& fn);
  // The median of one rank's times, maximum over ranks (collective).
  double median_over_ranks(std::vector<float> ts);
  // Rounds enough that the shortest of the functions' samples (each the median of its rounds so
  // far, the maximum over ranks: collective) add up to about budget_ms, within [rounds so far,
  // max_rounds].
  int rounds_for_short_samples(const std::vector<std::vector<float>>& ts, float per_sample, double budget_ms,
                               int max_rounds);

  const BenchConfig& cfg_;
  const Team& team_;
  detail::TeamState& t_;
  cudaStream_t stream_;
  comm::StartLine line_;  // before every timed run
};

}  // namespace tpgemm::bench
