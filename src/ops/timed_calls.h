// Timing collective calls on the team's own GPUs, as the measured planners need them: a CUDA graph
// of back-to-back calls, replayed from the start line (NOTE [start line]), the median replay's
// time per call, each candidate's slowest rank. Used by the GEMM ops' tuner (ops/tuner.cpp) and the
// measured all-reduce (ops/allreduce/allreduce_tuning.cpp).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "comm/start_line.h"
#include "core/cuda_raii.h"

namespace tpgemm::detail {

struct TeamState;

// Calls per replayed graph: as many as last about kGraphMs, within these bounds; timed replays
// per candidate: as many as its budget allows, within these.
constexpr int kMinPerGraph = 4, kMaxPerGraph = 20, kMinTimed = 3, kMaxTimed = 10;
constexpr double kGraphMs = 2.0;

// Elapsed ms between two events recorded around `fn` on `stream`, waited for within the team's
// host bound (the calls wait on the other ranks); after `line` where given.
float elapsed_ms(const TeamState& t, cudaStream_t stream, const std::function<void()>& fn,
                 const comm::StartLine* line = nullptr);

float median(std::vector<float> v);

// Every rank's value of one float per candidate, the slowest rank's kept (-1 anywhere: -1): a
// collective ends with its last rank. Collective.
std::vector<float> slowest_rank(TeamState& t, const std::vector<float>& mine);

// One candidate's calls, ready to time. Every member function is collective: every rank calls
// it for the same candidate, with the same per_graph.
struct TimedCalls {
  std::function<void(cudaStream_t)> call;  // enqueues one call of the candidate
  int per_graph = 1;                       // calls per captured graph
  CudaGraph graph;                         // (last: freed before what `call` uses)

  // Captures per_graph calls and replays the graph once. `call` must have run once (first-use
  // costs: kernels loading, matmul plans, peer mappings touched, none of which may happen under
  // capture). Agreed on before any timed replay: a rank whose capture failed must not leave its
  // peers replaying collective calls (and start-line barriers) alone.
  void capture(TeamState& t, cudaStream_t stream);
  // One timed replay from the start line, per call (ms).
  float replay_ms(const TeamState& t, const comm::StartLine& line, cudaStream_t stream) const;
  // The GPU time of one call (ms): one untimed call, one timed (which sizes the rest), then the
  // median over replays of a graph of kMinPerGraph to kMaxPerGraph calls lasting about kGraphMs,
  // as many replays as `budget_ms` allows (kMinTimed to kMaxTimed). Sets per_graph.
  float time(TeamState& t, const comm::StartLine& line, cudaStream_t stream, double budget_ms);
};

// One candidate's time per call (ms), its slowest rank's: `build` makes the candidate and sets
// calls.call (each of its steps agreed on, so that one failing on any rank skips the candidate on
// every rank alike), then the ranks start together and calls.time() runs under one agreement.
// -1 where the candidate could not be built or run on some rank; throws only when the team has
// failed (a wait for a peer ran out). Collective.
float time_candidate(TeamState& t, const std::function<void()>& build, TimedCalls& calls, const comm::StartLine& line,
                     cudaStream_t stream, double budget_ms);

}  // namespace tpgemm::detail
