// tpgemm-bench's timing (timer.h).
#include "bench/timer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

#include "core/check.h"
#include "core/cuda_raii.h"

namespace tpgemm::bench {
namespace {

// The middle of one rank's samples (the upper one of an even count).
float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

Timer::Timer(const BenchConfig& cfg, const Team& team, cudaStream_t stream)
    : cfg_(cfg), team_(team), t_(*team.state()), stream_(stream), line_(team.state()) {}

double Timer::max_over_ranks(double v) {
  double m = v;
  for (const auto& b : t_.allgather(&v, sizeof(v), "the slowest rank's time"))
    m = std::max(m, *reinterpret_cast<const double*>(b.data()));
  return m;
}
bool Timer::all_ranks(bool v) {
  const int32_t x = v;
  for (const auto& b : t_.allgather(&x, sizeof(x), "whether every rank passed"))
    if (*reinterpret_cast<const int32_t*>(b.data()) == 0) return false;
  return true;
}

float Timer::event_ms(const Event& start, const Event& stop, const std::function<void()>& fn) {
  line_.enqueue(stream_);
  return time_between(stream_, start, stop, fn);
}
double Timer::median_over_ranks(std::vector<float> ts) { return max_over_ranks(median(std::move(ts))); }

int Timer::rounds_for_short_samples(const std::vector<std::vector<float>>& ts, float per_sample, double budget_ms,
                                    int max_rounds) {
  double shortest = std::numeric_limits<double>::infinity();
  for (const std::vector<float>& t : ts) shortest = std::min(shortest, static_cast<double>(median(t)) * per_sample);
  shortest = max_over_ranks(shortest);
  const int done = ts.empty() ? 0 : static_cast<int>(ts.front().size());
  if (!(shortest > 0) || !std::isfinite(shortest)) return done;
  return std::clamp(static_cast<int>(std::ceil(budget_ms / shortest)), done, max_rounds);
}

double Timer::time_ms(const std::function<void()>& fn) { return time_ms(fn, cfg_.timing); }
double Timer::time_ms(const std::function<void()>& fn, BenchConfig::Timing timing) {
  return time_interleaved_ms({fn}, timing)[0];
}

std::vector<double> Timer::time_interleaved_ms(const std::vector<std::function<void()>>& fns) {
  return time_interleaved_ms(fns, cfg_.timing);
}
std::vector<double> Timer::time_interleaved_ms(const std::vector<std::function<void()>>& fns, BenchConfig::Timing timing) {
  const cudaStream_t st = stream_;
  for (const auto& fn : fns)
    for (int i = 0; i < cfg_.warmup_iterations; ++i) fn();
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
  team_.check();
  const bool sync = timing == BenchConfig::Timing::kSync;
  std::vector<CudaGraph> graphs;
  if (timing == BenchConfig::Timing::kGraph) {
    for (const auto& fn : fns) {
      graphs.push_back(CudaGraph::capture(st, [&] {
        for (int i = 0; i < cfg_.iterations; ++i) fn();
      }));
      graphs.back().launch(st);  // warm-up replay
    }
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
    team_.check();
  }
  t_.barrier();
  // sync: one call per sample, --iterations rounds; batch and graph: --iterations calls per
  // sample (their mean), 5 rounds, and more where the shortest function's sample is short: a
  // sample of 20 calls of a few microseconds lasts some 0.1 ms, in which the start line's and
  // the replay's jitter (a microsecond or two) weigh a few percent, so such samples are taken
  // until each function has had about kSampleBudgetMs of them (at most kMaxRounds rounds). The
  // ranks agree on the count (the maximum over ranks of that sample's median).
  constexpr int kBatchRepeats = 5, kMaxRounds = 25;
  constexpr double kSampleBudgetMs = 2.0;
  int rounds = sync ? cfg_.iterations : kBatchRepeats;
  const float per_sample = sync ? 1.0f : static_cast<float>(cfg_.iterations);
  const Event start = Event::create(true), stop = Event::create(true);
  std::vector<std::vector<float>> ts(fns.size());
  // Each round in its own order, the same on every rank (the calls are collective): no
  // implementation always follows the same one, or always comes first.
  std::vector<size_t> order(fns.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937 shuffle_rng(1);
  for (int r = 0; r < rounds; ++r) {
    std::shuffle(order.begin(), order.end(), shuffle_rng);
    for (const size_t i : order)
      ts[i].push_back(event_ms(start, stop, [&] {
        if (sync) fns[i]();
        else if (!graphs.empty()) graphs[i].launch(st);
        else for (int k = 0; k < cfg_.iterations; ++k) fns[i]();
      }) / per_sample);
    if (!sync && r + 1 == kBatchRepeats) rounds = rounds_for_short_samples(ts, per_sample, kSampleBudgetMs, kMaxRounds);
  }
  team_.check();
  std::vector<double> ms;
  for (auto& t : ts) ms.push_back(median_over_ranks(std::move(t)));
  return ms;
}

}  // namespace tpgemm::bench
