// Which implementation runs a problem, with which schedule parameters. Pure host logic.
#pragma once

#include <cstdint>

#include "plan/problem.h"
#include "tpgemm/types.h"

namespace tpgemm::plan {

struct Choice {
  Impl impl = Impl::kBaseline;
  int chunks = 1;    // pipelined: transfers per rank block (ag_gemm, gemm_rs) or rounds (gemm_ar)
  int comm_sms = 0;  // SMs the matmuls beside synchronisation kernels leave free
};

// Resolves options.impl == kAuto with the measured rules in choose.cpp (see docs/perf.md),
// and fills the schedule parameters the options leave open. Assumes the problem is valid.
Choice choose(const GemmProblem& p, const Topology& topo, const PlanOptions& options);

AllReduceImpl choose_allreduce(int64_t bytes, const Topology& topo);

}  // namespace tpgemm::plan
