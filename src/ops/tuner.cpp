#include "ops/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "comm/start_line.h"
#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "ops/common/random_fill.h"
#include "ops/timed_calls.h"

namespace tpgemm::detail {
namespace {

constexpr int64_t kDefaultBudgetMs = 500;  // for the timed calls of all candidates together
// NOTE [runoff]: within 8% of the pick, at most four, a replay of each in turn, each replay as many
// calls as last about kRunoffGraphMs (up to kMaxPerGraph), as many rounds as half the budget
// allows within these bounds.
constexpr double kRunoff = 1.08;
constexpr size_t kRunoffMax = 4;
constexpr double kRunoffGraphMs = 10.0;
constexpr int kMinRounds = 3, kMaxRounds = 7;

// One rank's operands for the problem: random A, B and C, each rank's its own (as in use: identical
// data on every rank is not what a model runs), D and the gathered A as outputs.
struct TuneOperands {
  DeviceBuffer a, b, c, d, a_gathered, scales;  // scales: e4m3, unit ones
  Operands ops;
};

TuneOperands make_operands(const GemmProblem& p, int world, int rank, bool gathered_a, cudaStream_t stream) {
  const OperandSizes n = operand_sizes(p, world);
  const size_t es = dtype_size(p.dtype), ds = dtype_size(d_dtype(p));
  TuneOperands t;
  t.a = DeviceBuffer(static_cast<size_t>(n.a) * es);
  t.b = DeviceBuffer(static_cast<size_t>(n.b) * es);
  if (p.has_c) t.c = DeviceBuffer(static_cast<size_t>(n.c) * ds);
  t.d = DeviceBuffer(static_cast<size_t>(n.d) * ds);
  if (gathered_a) t.a_gathered = DeviceBuffer(static_cast<size_t>(p.l * p.m * p.k) * es);
  const uint64_t seed = 0x7a10 + 4 * static_cast<uint64_t>(rank);
  ops::fill_random(t.a.get(), p.dtype, 1, 1, n.a, 0, 1, seed + 1, stream);
  ops::fill_random(t.b.get(), b_dtype(p), 1, 1, n.b, 0, 1, seed + 2, stream);
  if (p.has_c) ops::fill_random(t.c.get(), d_dtype(p), 1, 1, n.c, 0, 1, seed + 3, stream);
  t.ops = {t.a.get(), t.b.get(), t.c.get(), t.d.get(), t.a_gathered.get(), p.m};
  // FP8: unit scales, one vector for both (as long as the longer one; 16-byte aligned, as
  // cuBLASLt reads them).
  const std::vector<float> unit(static_cast<size_t>(std::max(n.a_scale, n.b_scale)), 1.0f);
  if (is_fp8(p.dtype)) {
    t.scales = DeviceBuffer(unit.size() * sizeof(float));
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(t.scales.get(), unit.data(), unit.size() * sizeof(float), cudaMemcpyHostToDevice,
                                      stream));
    t.ops.a_scale = t.ops.b_scale = t.scales.as<float>();
  }
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (unit is on this stack)
  return t;
}

// One candidate ready to time: its instance and its calls.
struct Graphed {
  std::unique_ptr<OpImpl> impl;
  TimedCalls calls;  // (after impl: its graph goes first)
};

// Graphed calls of `g.impl` on the tuner's operands `o` (which outlive them).
void bind_calls(Graphed& g, const Operands& o) {
  g.calls.call = [impl = g.impl.get(), &o](cudaStream_t stream) {
    impl->prologue(o, stream);
    impl->run(o, stream);
  };
}

// NOTE [runoff]
// The first timings rank candidates each timed alone in short replays, with the GPU idle in
// between. Calls that run back to back for longer draw the GPU down to the clock its power
// allows, and not every implementation alike: at W=2, from 4-call to 60-call replays in
// alternation, one shape's times rose 1.5% for gemm_twoshot and 10% for pipelined_ce, another's
// 17% for fused (docs/planner.md). So the pick and the candidates within kRunoff of its time
// (plan::near_ties: at most kRunoffMax) are built again together and timed in alternation, a
// replay of each in turn, each replay lasting about kRunoffGraphMs, as many rounds as half the
// budget allows (kMinRounds to kMaxRounds): each one's median, slowest rank, decides among them
// with the same tie rules (plan::fastest). Where they cannot all be built at once (memory), the
// first timing stands.
int runoff(TeamState& t, const std::shared_ptr<TeamState>& team, const GemmProblem& p, bool measure_core,
           const std::vector<plan::Choice>& candidates, const std::vector<double>& times, const std::vector<int>& per_graph,
           double budget_ms, const Operands& o, const comm::StartLine& line, cudaStream_t stream, std::string& table) {
  const int first = plan::fastest(candidates, times);
  const std::vector<size_t> close = plan::near_ties(candidates, times, kRunoff, kRunoffMax);
  if (close.empty()) return first;
  // Calls per replay and the time of a round: the same on every rank (from the agreed times).
  std::vector<int> calls;
  double round_ms = 0;
  for (size_t i : close) {
    calls.push_back(std::max(per_graph[i], static_cast<int>(std::clamp<double>(std::ceil(kRunoffGraphMs / times[i]),
                                                                              kMinPerGraph, kMaxPerGraph))));
    round_ms += times[i] * calls.back();
  }
  const int rounds = static_cast<int>(std::clamp<double>(budget_ms / 2 / round_ms, kMinRounds, kMaxRounds));
  std::vector<Graphed> g(close.size());
  std::vector<float> mine(close.size(), -1);
  try {
    t.agree_local("building the runoff's candidates", [&] {
      for (size_t j = 0; j < close.size(); ++j) {
        g[j].impl = make_impl({team, p, candidates[close[j]], measure_core});
        bind_calls(g[j], o);
        g[j].calls.per_graph = calls[j];
      }
    });
    t.barrier();
    t.agree_local("timing the runoff", [&] {
      for (Graphed& x : g) {
        x.calls.call(stream);  // first use, as in TimedCalls::time
        x.calls.capture(t, stream);
      }
      std::vector<std::vector<float>> ms(g.size());
      for (int r = 0; r < rounds; ++r)
        for (size_t j = 0; j < g.size(); ++j) ms[j].push_back(g[j].calls.replay_ms(t, line, stream));
      for (size_t j = 0; j < g.size(); ++j) mine[j] = median(ms[j]);
    });
  } catch (const Error&) {
    if (t.has_failed()) throw;  // the team failed, not the runoff
    return first;
  }
  t.check();
  const std::vector<float> slowest = slowest_rank(t, mine);
  std::vector<plan::Choice> cs;
  std::vector<double> ts;
  table += "; in alternation:";
  for (size_t j = 0; j < close.size(); ++j) {
    cs.push_back(candidates[close[j]]);
    ts.push_back(slowest[j]);
    table += strfmt("%s %s %.4f", j ? "," : "", describe(candidates[close[j]]).c_str(), slowest[j]);
  }
  const int winner = plan::fastest(cs, ts);
  return winner < 0 ? first : static_cast<int>(close[static_cast<size_t>(winner)]);
}

}  // namespace

std::string describe(const plan::Choice& c) {
  std::string s(to_string(c.impl));
  if (c.impl == Impl::kPipelinedCE || c.impl == Impl::kFused) s += strfmt("/%d", c.chunks);
  if (c.impl == Impl::kFused && c.comm_sms > 0) s += strfmt("/%dsm", c.comm_sms);
  if (c.matmul == Matmul::kSm90) s += "/sm90";
  return s;
}

double tune_budget_ms() {
  return static_cast<double>(env_int("TPGEMM_TUNE_BUDGET_MS", 1, 600000).value_or(kDefaultBudgetMs));
}

Measured measure(const std::shared_ptr<TeamState>& team, const GemmProblem& p, const std::vector<plan::Choice>& candidates,
                 bool gathered_a, bool measure_core, int64_t call_m) {
  TeamState& t = *team;
  const auto start = std::chrono::steady_clock::now();
  // Rank 0's budget, for the counts of collective calls that follow from it.
  double total_budget = tune_budget_ms();
  std::memcpy(&total_budget, t.allgather(&total_budget, sizeof(total_budget), "the planner's budget")[0].data(),
              sizeof(total_budget));
  const double budget = total_budget / static_cast<double>(std::max<size_t>(1, candidates.size()));
  Stream stream;
  TuneOperands operands;
  t.agree_local("allocating the planner's operands", [&] {
    stream = Stream::create();
    operands = make_operands(p, t.world, t.rank, gathered_a, stream.get());
    if (call_m > 0) operands.ops.m = call_m;
  });
  const comm::StartLine line(team);
  Measured best;
  std::vector<double> times;  // the slowest rank's, per candidate; -1: failed
  std::vector<int> per_graph;
  std::vector<std::string> rows;
  for (const plan::Choice& c : candidates) {
    Graphed g;
    const auto build = [&] {
      t.agree_local("building a candidate", [&] {
        g.impl = make_impl({team, p, c, measure_core});
        bind_calls(g, operands.ops);
      });
    };
    const float slowest = time_candidate(t, build, g.calls, line, stream.get(), budget);
    per_graph.push_back(g.calls.per_graph);  // (g is freed at the end of the iteration, before the next is built)
    times.push_back(slowest);
    rows.push_back(describe(c) + (slowest < 0 ? std::string(" -") : strfmt(" %.4f", slowest)));
  }
  if (plan::fastest(candidates, times) < 0) throw Error(ErrorCode::kUnsupported, "the planner could build none of its candidates");
  for (size_t i = 0; i < rows.size(); ++i) best.table += (i ? ", " : "") + rows[i];
  const int winner = runoff(t, team, p, measure_core, candidates, times, per_graph, total_budget, operands.ops, line, stream.get(),
                            best.table);
  best.choice = candidates[static_cast<size_t>(winner)];
  best.tuning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return best;
}

}  // namespace tpgemm::detail
