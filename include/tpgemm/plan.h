// A Plan is one tensor-parallel GEMM (op, shape, dtype, implementation), made once,
// collectively, and then run many times on the caller's stream.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "tpgemm/error.h"
#include "tpgemm/team.h"
#include "tpgemm/types.h"

namespace tpgemm {

namespace detail {
struct PlanState;
}

class Plan {
 public:
  // Collective: every rank of the team must make the same plan at the same point. The
  // problem is validated on every rank and compared across ranks; if any rank finds it
  // invalid (or the ranks disagree), every rank throws the same tpgemm::Error. Allocates the
  // workspace (symmetric memory for the overlapped implementations) and cuBLASLt plans, on the
  // team's GPU; this, prepare() and run() leave the caller's current device as they found it.
  Plan(const Team& team, const GemmProblem& problem, const PlanOptions& options = {});
  ~Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  // Enqueues the op on `stream` (a stream of the team's GPU) and returns without waiting for the
  // GPU. Collective: every rank calls it with its own operands. The operands are checked on every
  // rank (null, misaligned, D overlapping an input, the call's M); a rank whose are bad throws
  // before it enqueues anything, so nothing of the caller's is written. With
  // TeamOptions::call_check = kCollective every rank throws with it (the ranks compare verdicts
  // on the host); with kLocal (the default) the team fails on that rank, which cannot know
  // whether its peers ran the call, and they fail on their own bounded waits (team.h). The calls
  // of one plan must be ordered on the GPU (one stream, or streams joined by events): they share
  // the plan's buffers and counters.
  // Operands::m may give the call fewer rows than the plan's M: such a call runs the
  // implementation chosen for its range of M, [R/2, R) for a power of two R (in units of W where
  // the op shards M), made on the first call in that range, collectively, the way a plan is
  // (its own symmetric memory, at most about as much again as the plan's over all ranges). Under
  // CUDA-graph capture nothing can be made: prepare() the ranges first.
  void run(const Operands& operands, cudaStream_t stream);

  // Collective: makes the implementation the calls of `m` rows will run (see run()), now, outside
  // any capture. Nothing for the plan's own M.
  void prepare(int64_t m);

  Impl impl() const;
  const GemmProblem& problem() const;
  // The options as the planner resolved them: the implementation that runs, its chunks per rank
  // block and the SMs left to tpgemm's kernels beside the matmuls (as PlanOptions documents).
  PlanOptions options() const;
  // How the planner chose it: asked for, tuned (with every candidate's time), cached, or the rules.
  const PlanSelection& selection() const;
  // The same for the calls of `m` rows, once their range is made (run() or prepare()); else null.
  // An `m` no call of the plan could have throws InvalidArgument, as run() would.
  const PlanSelection* selection(int64_t m) const;
  // options() for the calls of `m` rows (as selection(m)); impl kAuto where their range is not made.
  PlanOptions options(int64_t m) const;
  Impl impl(int64_t m) const;  // kAuto where the range of `m` is not made yet

  // Would this rank accept the problem with these options? Local and non-throwing.
  static Status can_implement(const Team& team, const GemmProblem& problem,
                              const PlanOptions& options = {});

 private:
  std::unique_ptr<detail::PlanState> state_;
};

// Element counts of the operands one rank passes for a problem on a team of `world_size`.
struct OperandSizes {
  int64_t a = 0, b = 0, c = 0, d = 0;
  int64_t a_scale = 0, b_scale = 0;  // fp32 values behind Operands::a_scale, b_scale (e4m3 only)
};
OperandSizes operand_sizes(const GemmProblem& problem, int world_size);

// ScaleMode::kBlock's layout (types.h): K in blocks of kScaleBlock, and the stride between the
// rows of B's scales, its K blocks rounded up to a multiple of 4 (as cuBLASLt reads them).
constexpr int64_t kScaleBlock = 128;
inline int64_t scale_k_blocks(const GemmProblem& p) { return (p.k + kScaleBlock - 1) / kScaleBlock; }
inline int64_t b_scale_ld(const GemmProblem& p) { return (scale_k_blocks(p) + 3) / 4 * 4; }

}  // namespace tpgemm
