#include "ops/timed_calls.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/team_state.h"

namespace tpgemm::detail {

float elapsed_ms(const TeamState& t, cudaStream_t stream, const std::function<void()>& fn,
                 const comm::StartLine* line) {
  const Event start = Event::create(/*timing=*/true), stop = Event::create(/*timing=*/true);
  if (line) line->enqueue(stream);
  return time_between(stream, start, stop, fn, [&] {
    t.wait_for_peers(stream, "the planner's timed calls of a candidate (every rank runs them)");
  });
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<float> slowest_rank(TeamState& t, const std::vector<float>& mine) {
  std::vector<float> slowest = mine;
  for (const auto& theirs : t.allgather(mine.data(), mine.size() * sizeof(float), "the planner's timings")) {
    std::vector<float> v(mine.size());
    std::memcpy(v.data(), theirs.data(), v.size() * sizeof(float));
    for (size_t i = 0; i < v.size(); ++i) slowest[i] = v[i] < 0 || slowest[i] < 0 ? -1 : std::max(slowest[i], v[i]);
  }
  return slowest;
}

void TimedCalls::capture(TeamState& t, cudaStream_t stream) {
  t.agree_local("capturing a candidate's calls", [&] {
    graph = CudaGraph::capture(stream, [&] {
      for (int i = 0; i < per_graph; ++i) call(stream);
    });
  });
  graph.launch(stream);
}

float TimedCalls::replay_ms(const TeamState& t, const comm::StartLine& line, cudaStream_t stream) const {
  return elapsed_ms(t, stream, [&] { graph.launch(stream); }, &line) / static_cast<float>(per_graph);
}

// A graph, so that the host's enqueue (as long as a call of a few microseconds, and as jittery)
// is in no candidate's time: what a call costs the GPU, which is what it costs a model that runs
// ahead of its GPUs or replays graphs. At least four calls per replay, as long as about 2 ms
// together: the steady state of calls that follow each other, where a rank that finished early
// starts its next call while a peer is still in the last one, not only calls started together
// from the start line (timed alone, implementations that run a collective kernel before or after
// the matmul measured up to 12% faster than in a row of 20).
float TimedCalls::time(TeamState& t, const comm::StartLine& line, cudaStream_t stream, double budget_ms) {
  call(stream);  // first use: not timed
  // Every rank must make the same number of calls (each is collective): the counts follow from
  // the agreed budget and the slowest rank's first timed call, the same numbers everywhere.
  const double first = slowest_rank(t, {std::max(elapsed_ms(t, stream, [&] { call(stream); }), 1e-3f)})[0];
  // Enough calls per graph to outlast a replay's launch; enough replays to fill the budget.
  per_graph = static_cast<int>(std::clamp<double>(std::ceil(kGraphMs / first), kMinPerGraph, kMaxPerGraph));
  const int replays = static_cast<int>(std::clamp<double>(budget_ms / (first * per_graph), kMinTimed, kMaxTimed));
  capture(t, stream);
  std::vector<float> ms;
  for (int r = 0; r < replays; ++r) ms.push_back(replay_ms(t, line, stream));
  return median(ms);
}

float time_candidate(TeamState& t, const std::function<void()>& build, TimedCalls& calls, const comm::StartLine& line,
                     cudaStream_t stream, double budget_ms) {
  float mine = -1;  // this rank's median; -1: not built or failed (on some rank: every rank knows)
  try {
    build();
    t.barrier();  // start together: a rank's skew is not the candidate's time
    t.agree_local("timing a candidate", [&] { mine = calls.time(t, line, stream, budget_ms); });
  } catch (const Error&) {
    if (t.has_failed()) throw;  // the team failed, not the candidate
    mine = -1;
  }
  t.check();  // NCCL's asynchronous errors too
  return slowest_rank(t, {mine})[0];
}

}  // namespace tpgemm::detail
