#include "ops/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "comm/start_line.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "ops/common/random_fill.h"

namespace tpgemm::detail {
namespace {

// Timed replays per candidate: as many as its share of the budget allows, within these bounds;
// each a graph of calls lasting about kGraphMs (at most kMaxPerGraph calls).
constexpr int kMinTimed = 3, kMaxTimed = 10, kMaxPerGraph = 20;
constexpr double kGraphMs = 0.2;
constexpr int64_t kDefaultBudgetMs = 500;  // for the timed calls of all candidates together

// One rank's operands for the problem: random A, B and C, D and the gathered A as outputs.
struct TuneOperands {
  DeviceBuffer a, b, c, d, a_gathered, scales;  // scales: e4m3, unit ones
  Operands ops;
};

TuneOperands make_operands(const GemmProblem& p, int world, bool gathered_a, cudaStream_t stream) {
  const OperandSizes n = operand_sizes(p, world);
  const size_t es = dtype_size(p.dtype), ds = dtype_size(d_dtype(p));
  TuneOperands t;
  t.a = DeviceBuffer(static_cast<size_t>(n.a) * es);
  t.b = DeviceBuffer(static_cast<size_t>(n.b) * es);
  if (p.has_c) t.c = DeviceBuffer(static_cast<size_t>(n.c) * ds);
  t.d = DeviceBuffer(static_cast<size_t>(n.d) * ds);
  if (gathered_a) t.a_gathered = DeviceBuffer(static_cast<size_t>(p.l * p.m * p.k) * es);
  ops::fill_random(t.a.get(), p.dtype, 1, 1, n.a, 0, 1, 0x7a11, stream);
  ops::fill_random(t.b.get(), b_dtype(p), 1, 1, n.b, 0, 1, 0x7a12, stream);
  if (p.has_c) ops::fill_random(t.c.get(), d_dtype(p), 1, 1, n.c, 0, 1, 0x7a13, stream);
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

// Elapsed ms between two events recorded around `fn` on `stream` (the planner's own), waited
// for within the team's host bound (the calls wait on the other ranks); after `line` where given
// (NOTE [start line]).
float elapsed_ms(const TeamState& t, cudaStream_t stream, const std::function<void()>& fn,
                 const comm::StartLine* line = nullptr) {
  const Event start = Event::create(/*timing=*/true), stop = Event::create(/*timing=*/true);
  if (line) line->enqueue(stream);
  return time_between(stream, start, stop, fn, [&] {
    t.wait_for_peers(stream, "the planner's timed calls of a candidate (every rank runs them)");
  });
}

// The GPU time of one call (ms): the median over replays of a CUDA graph of back-to-back calls,
// divided by the calls. A graph, so that the host's enqueue (as long as a call of a few
// microseconds, and as jittery) is in no candidate's time: what a call costs the GPU, which is
// what it costs a model that runs ahead of its GPUs or replays graphs. Every implementation can
// be captured (the dist tests replay each from a graph).
float time_calls(TeamState& t, OpImpl& impl, const Operands& o, const comm::StartLine& line, cudaStream_t stream,
                 double budget_ms) {
  const auto call = [&] {
    impl.prologue(o, stream);
    impl.run(o, stream);
  };
  call();  // warm-up: first-use costs (cuBLASLt's kernels loading, matmul plans, peer mappings touched)
  // Every rank must make the same number of calls (each is collective): the counts follow from
  // rank 0's budget and the slowest rank's first call, the same numbers everywhere.
  double sizing[2] = {std::max(elapsed_ms(t, stream, call), 1e-3f), budget_ms};
  const auto all = t.allgather(sizing, sizeof(sizing), "the planner's first timings");
  double first = 0, budget = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    double theirs[2];
    std::memcpy(theirs, all[r].data(), sizeof(theirs));
    first = std::max(first, theirs[0]);
    if (r == 0) budget = theirs[1];
  }
  // Enough calls per graph to outlast a replay's launch; enough replays to fill the budget.
  const int per_graph = static_cast<int>(std::clamp<double>(std::ceil(kGraphMs / first), 1, kMaxPerGraph));
  const int replays = static_cast<int>(std::clamp<double>(budget / (first * per_graph), kMinTimed, kMaxTimed));
  // Captured, then agreed on before any replay: a rank whose capture failed must not leave its
  // peers replaying collective calls (and start-line barriers) alone.
  CudaGraph graph;
  t.agree_local("capturing a candidate's calls", [&] {
    graph = CudaGraph::capture(stream, [&] {
      for (int i = 0; i < per_graph; ++i) call();
    });
  });
  graph.launch(stream);  // warm-up replay
  std::vector<float> ms;
  for (int r = 0; r < replays; ++r)
    ms.push_back(elapsed_ms(t, stream, [&] { graph.launch(stream); }, &line) / per_graph);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

std::string describe(const plan::Choice& c) {
  std::string s(to_string(c.impl));
  if (c.impl == Impl::kPipelinedCE || c.impl == Impl::kFused) s += strfmt("/%d", c.chunks);
  if (c.impl == Impl::kFused && c.comm_sms > 0) s += strfmt("/%dsm", c.comm_sms);
  return s;
}

Measured measure(const std::shared_ptr<TeamState>& team, const GemmProblem& p, const std::vector<plan::Choice>& candidates,
                 bool gathered_a) {
  TeamState& t = *team;
  const auto start = std::chrono::steady_clock::now();
  const double budget = static_cast<double>(env_int("TPGEMM_TUNE_BUDGET_MS", 1, 600000).value_or(kDefaultBudgetMs)) /
                        static_cast<double>(std::max<size_t>(1, candidates.size()));
  Stream stream;
  TuneOperands operands;
  t.agree_local("allocating the planner's operands", [&] {
    stream = Stream::create();
    operands = make_operands(p, t.world, gathered_a, stream.get());
  });
  const comm::StartLine line(team);
  Measured best;
  std::vector<double> times;  // the slowest rank's, per candidate; -1: failed
  std::vector<std::string> rows;
  for (const plan::Choice& c : candidates) {
    std::unique_ptr<OpImpl> impl;
    float mine = -1;  // this rank's median; -1: not built or failed (on some rank: every rank knows)
    try {
      t.agree_local("building a candidate", [&] { impl = make_impl({team, p, c}); });
      t.barrier();  // start together: a rank's skew is not the candidate's time
      // Agreed on, so that a candidate failing on one rank is skipped by all alike.
      t.agree_local("timing a candidate", [&] { mine = time_calls(t, *impl, operands.ops, line, stream.get(), budget); });
    } catch (const Error&) {
      if (t.has_failed()) throw;  // the team failed (a wait for a peer ran out), not the candidate
      impl.reset();
      mine = -1;
    }
    t.check();  // NCCL's asynchronous errors too
    // The op's time is its slowest rank's.
    float slowest = mine;
    for (const auto& theirs : t.allgather(&mine, sizeof(mine), "the planner's timings")) {
      const float v = *reinterpret_cast<const float*>(theirs.data());
      slowest = v < 0 || slowest < 0 ? -1 : std::max(slowest, v);
    }
    times.push_back(slowest);
    rows.push_back(describe(c) + (slowest < 0 ? std::string(" -") : strfmt(" %.4f", slowest)));
  }
  const int winner = plan::fastest(candidates, times);
  if (winner < 0) throw Error(ErrorCode::kUnsupported, "the planner could build none of its candidates");
  best.choice = candidates[static_cast<size_t>(winner)];
  for (size_t i = 0; i < rows.size(); ++i) best.table += (i ? ", " : "") + rows[i];
  best.tuning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return best;
}

}  // namespace tpgemm::detail
