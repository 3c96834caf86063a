// The interface every implementation of a GEMM op fills, and the factories of each file.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>

#include "comm/team_state.h"
#include "plan/choose.h"
#include "tpgemm/types.h"

namespace tpgemm::detail {

struct ImplContext {
  std::shared_ptr<TeamState> team;
  GemmProblem problem;
  plan::Choice choice;
  // Whether tpgemm's GEMM core may time its configurations for its matmuls (NOTE [measured core
  // config]); false with tuning off or a deterministic plan: the core's rule, the same
  // configuration in every process.
  bool measure_core = true;
};

// The problem of one call: the plan's with the call's M (Operands::m, which Plan::run always sets).
inline GemmProblem call_problem(const GemmProblem& p, const Operands& o) {
  GemmProblem q = p;
  if (o.m > 0) q.m = o.m;
  return q;
}

// The environment settings that change a protocol between ranks, as " NAME=value" pairs (those
// set): part of every plan's descriptor, so that ranks that differ fail alike (ops/plan.cpp).
std::string protocol_settings();
// PlanOptions::Tune::kDefault resolved: kOff where TPGEMM_TUNE=0, else kOn (other values as asked).
PlanOptions::Tune resolve_tune(PlanOptions::Tune asked);

class OpImpl {
 public:
  virtual ~OpImpl() = default;
  // Work that writes only tpgemm's own buffers, enqueued once this rank's operands passed
  // their local check but before the ranks agree (NOTE [collective argument check]): it
  // overlaps the host rendezvous. If a peer then rejects the call, it has touched nothing of
  // the caller's, and no peer reads those buffers until the next call's flags say so.
  virtual void prologue(const Operands& ops, cudaStream_t stream) {
    (void)ops;
    (void)stream;
  }
  // The rest of the call. Operands are validated on every rank. Operands::m is the call's M: the
  // problem's M, or any M up to it for the implementations plan::takes_any_m takes.
  virtual void run(const Operands& ops, cudaStream_t stream) = 0;
};

std::unique_ptr<OpImpl> make_ag_gemm_baseline(const ImplContext& ctx);   // ops/ag_gemm/baseline.cpp
std::unique_ptr<OpImpl> make_gemm_rs_baseline(const ImplContext& ctx);   // ops/gemm_rs/baseline.cpp
std::unique_ptr<OpImpl> make_gemm_ar_baseline(const ImplContext& ctx);   // ops/gemm_ar/baseline.cpp
std::unique_ptr<OpImpl> make_ag_gemm_fused(const ImplContext& ctx);      // ops/ag_gemm/fused.cpp
std::unique_ptr<OpImpl> make_fused_tile_reduce(const ImplContext& ctx);  // ops/gemm_rs/fused.cpp (gemm_rs, gemm_ar)
std::unique_ptr<OpImpl> make_ag_gemm_naive_remote(const ImplContext& ctx);       // ops/ag_gemm/naive_remote.cu
std::unique_ptr<OpImpl> make_ag_gemm_threadload_gather(const ImplContext& ctx);  // ops/ag_gemm/threadload_gather.cu
std::unique_ptr<OpImpl> make_ag_gemm_gather_then_gemm(const ImplContext& ctx);   // ops/ag_gemm/gather_then_gemm.cu
std::unique_ptr<OpImpl> make_pipelined_ce(const ImplContext& ctx);       // ops/pipelined/pipelined_ce.cpp (all ops)
std::unique_ptr<OpImpl> make_gemm_ar_symmetric(const ImplContext& ctx);  // ops/gemm_ar/gemm_allreduce.cpp (one/two-shot)
std::unique_ptr<OpImpl> make_gemm_ar_fused_decode(const ImplContext& ctx);  // ops/gemm_ar/fused_decode.cpp
std::unique_ptr<OpImpl> make_gemm_rs_reducescatter(const ImplContext& ctx);  // ops/gemm_rs/gemm_reducescatter.cpp
std::unique_ptr<OpImpl> make_ag_gemm_allgather(const ImplContext& ctx);      // ops/ag_gemm/allgather_gemm.cpp

}  // namespace tpgemm::detail
