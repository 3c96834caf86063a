// The measured planner: the implementation of `auto` is the candidate that ran fastest on the
// team's own GPUs.
//
// NOTE [measured planner]
// On Plan creation with impl = auto, every rank builds the candidates plan::candidates() lists for
// the problem (the implementations that serve it, and the chunk counts worth trying), one after
// the other, and times each on its own random operands: one warm-up call, one timed call (which
// sizes what follows), then a CUDA graph of back-to-back calls lasting about 2 ms (4 to 20 calls),
// warmed up by a replay, then replayed as often as the time budget allows (3 to 10
// times; TPGEMM_TUNE_BUDGET_MS, 500 ms for all candidates, the runoff below half as much again),
// the median replay's time per call kept: the GPU's time, without the host's enqueue or its jitter.
// The ranks then exchange their medians and take each candidate's slowest rank: that is the op's
// time, since a collective ends with its last rank. Every rank has the same table, so every rank
// keeps the same winner, the fastest, where an earlier candidate wins a tie within 1%, and the
// baseline (the first) within 2%: the tuner's own noise never moves a shape off the baseline.
// Near ties are timed again side by side, in replays of up to 20 calls or about 10 ms, nearer the
// clock of sustained calls (NOTE [runoff], tuner.cpp). Each candidate is freed as
// soon as it is timed, and the plan builds the winner afresh once the tuner's operands are freed too: the
// instance that was timed (its first calls run on the tuner's stream and graphs, beside the
// tuner's memory) measured slower per call than a fresh one on calls of a few microseconds
// (docs/planner.md). Every timed replay starts on all GPUs together (NOTE [start line]). A candidate that fails to build (memory, say) is
// skipped on every rank alike. What was timed, and how long tuning took, the plan reports
// (Plan::selection()); the choice goes into the tuning cache (plan/tune_cache.h) for the next
// process. Where tuning is off (PlanOptions::tune, TPGEMM_TUNE=0) or fails, the rules of
// plan/choose.cpp decide.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/op_impl.h"

namespace tpgemm::detail {

struct Measured {
  plan::Choice choice;  // the winner (its instance is not kept: NOTE [measured planner])
  // "name time, ..." per candidate, the slowest rank's median in ms; then, where near ties ran
  // again, "; in alternation: name time, ..."
  std::string table;
  double tuning_ms = 0;  // wall time of the whole measurement on this rank
};

// Collective: every rank passes the same problem and candidates. Throws only when the team has
// failed (or no candidate could be built: Unsupported).
// `measure_core`: ImplContext::measure_core of every candidate built. `call_m`: the M of the timed
// calls (Operands::m; a range's candidates, which take any M, are timed inside it), else p.m.
Measured measure(const std::shared_ptr<TeamState>& team, const GemmProblem& p, const std::vector<plan::Choice>& candidates,
                 bool gathered_a, bool measure_core, int64_t call_m = 0);

// TPGEMM_TUNE_BUDGET_MS (1 to 600,000), else the default: the time for the timed calls of all
// candidates together. Throws InvalidArgument naming the variable on any other value.
double tune_budget_ms();

// Builds one implementation (collective; NOTE [collective construction]).
std::unique_ptr<OpImpl> make_impl(const ImplContext& ctx);

// "pipelined_ce/2", "fused/1/32": an implementation and the knobs that differ from none.
std::string describe(const plan::Choice& c);

}  // namespace tpgemm::detail
