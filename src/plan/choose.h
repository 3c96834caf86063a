// Which implementation runs a problem, with which schedule parameters. Pure host logic.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/problem.h"
#include "tpgemm/types.h"

namespace tpgemm::plan {

struct Choice {
  Impl impl = Impl::kBaseline;
  int chunks = 1;    // pipelined: transfers per rank block (ag_gemm, gemm_rs) or rounds (gemm_ar)
  int comm_sms = 0;  // SMs the matmuls beside synchronisation kernels leave free
  Matmul matmul = Matmul::kAuto;  // pipelined_ce: kCublasLt or kSm90; the others: kAuto (their own)
  bool operator==(const Choice&) const = default;
};

// Whether pipelined_ce's matmuls can run on the Hopper GEMM core for `p` (PlanOptions::matmul):
// along M, A stored [M, K], bf16 or fp16 in and out, rows of 16 bytes, sm_90 GPUs. The plan checks
// every matmul's shape (strides too) when it is made.
bool pipelined_core_possible(const GemmProblem& p, const Topology& topo);

// Resolves options.impl == kAuto with the measured rules in choose.cpp (see docs/perf.md),
// and fills the schedule parameters the options leave open. Assumes the problem is valid.
Choice choose(const GemmProblem& p, const Topology& topo, const PlanOptions& options);

// The all-reduce's algorithm for a message of `bytes`, and the largest message it gives one-shot
// or two-shot on `topo` (0: none; NCCL takes everything larger).
AllReduceImpl choose_allreduce(int64_t bytes, const Topology& topo);
int64_t allreduce_largest(AllReduceImpl impl, const Topology& topo);

// Whether `impl` (with `matmul`) runs calls of `p` of any M up to p.m (Operands::m): the collective
// and the matmul apart, each sized per call; and pipelined_ce, whose schedule follows the call's
// rows (NOTE [pipelined calls of fewer rows]), with cuBLASLt's matmuls on bf16 or fp16 operands.
// fused, and pipelined_ce on the Hopper core (its configuration measured per matmul shape) or on
// FP8 operands (scales laid out per chunk), run p.m only.
bool takes_any_m(const GemmProblem& p, Impl impl, Matmul matmul = Matmul::kAuto);

// Whether `impl` sums the partial products of `p` on `world` ranks in an order of its own
// schedule's (every implementation but the baseline's gemm_rs and gemm_ar on several ranks, which
// sum in NCCL), and the refusal that
// PlanOptions::deterministic gives one that does not.
bool fixed_reduction_order(const GemmProblem& p, Impl impl, int world);
Status deterministic_supported(const GemmProblem& p, Impl impl, int world);

// choose(), among the implementations that take any M, for the calls of a range of M up to p.m
// (plan::range_top): the rules' choice where it takes any M (pipelined_ce: where it is their
// choice at the range's bottom too, about half of p.m); else the op's collective-then-matmul
// implementation.
Choice choose_any_m(const GemmProblem& p, const Topology& topo, const PlanOptions& options);

// What the planner times for `p` (NOTE [measured planner]): every implementation that serves it
// (never the ladder's), with the chunk counts worth trying; the baseline first. `any_m`: only
// those takes_any_m takes. Options the caller fixed (chunks, comm_sms) stay fixed.
std::vector<Choice> candidates(const GemmProblem& p, const Topology& topo, const PlanOptions& options, bool any_m);

// The winner among `candidates` (in their order) timed at `ms` each (< 0: not built or failed):
// the fastest, except that an earlier candidate keeps a tie within 1% and the baseline (the
// first) within 2%, so that timing noise never moves a shape off it (docs/planner.md). -1 if
// every candidate failed.
int fastest(const std::vector<Choice>& candidates, const std::vector<double>& ms);

// The candidates to time again in alternation (NOTE [runoff], ops/tuner.cpp): fastest()'s pick and
// the quickest others within `within` (a ratio, 1.03: 3%) of its time, `most` in all, in the
// candidates' order; empty where no other is that close.
std::vector<size_t> near_ties(const std::vector<Choice>& candidates, const std::vector<double>& ms, double within,
                              size_t most);

}  // namespace tpgemm::plan
