#include "plan/choose.h"

namespace tpgemm::plan {
namespace {

// Default chunking and carve-out per op, used whenever the options leave them open.
Choice fill_defaults(const GemmProblem& p, int world, Impl impl, const PlanOptions& o) {
  Choice c;
  c.impl = impl;
  const int64_t block = max_block_rows(p.m, world);
  c.chunks = o.chunks_per_rank > 0 ? o.chunks_per_rank : (p.op == Op::kGemmAr && block >= 1024 ? 2 : 1);
  c.comm_sms = o.comm_sms >= 0 ? o.comm_sms : 2;
  return c;
}

}  // namespace

Choice choose(const GemmProblem& p, const Topology& topo, const PlanOptions& options) {
  if (options.impl != Impl::kAuto) return fill_defaults(p, topo.world, options.impl, options);
  const bool symmetric = topo.world > 1 && topo.all_lsa_peers;
  if (!symmetric) return fill_defaults(p, topo.world, Impl::kBaseline, options);
  // First rules, from the overlap arithmetic in docs/perf.md; refined by measurement.
  const int64_t block = max_block_rows(p.m, topo.world);
  const double d_bytes = static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.l) * 2.0;
  Impl impl = Impl::kBaseline;
  switch (p.op) {
    case Op::kAgGemm: impl = block >= 512 ? Impl::kPipelinedCE : Impl::kBaseline; break;
    case Op::kGemmRs: impl = block >= 256 ? Impl::kPipelinedCE : Impl::kBaseline; break;
    case Op::kGemmAr:
      impl = d_bytes <= 1.0 * (1 << 20) ? Impl::kGemmOneShot
             : d_bytes <= 32.0 * (1 << 20) ? Impl::kGemmTwoShot
                                           : Impl::kPipelinedCE;
      break;
  }
  return fill_defaults(p, topo.world, impl, options);
}

AllReduceImpl choose_allreduce(int64_t bytes, const Topology& topo) {
  if (topo.world == 1 || !topo.all_lsa_peers) return AllReduceImpl::kNccl;
  if (bytes <= (int64_t(256) << 10)) return AllReduceImpl::kOneShot;
  if (bytes <= (int64_t(64) << 20)) return AllReduceImpl::kTwoShot;
  return AllReduceImpl::kNccl;
}

}  // namespace tpgemm::plan
