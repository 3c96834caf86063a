// GEMM + AllReduce for small and mid-sized M: the matmul writes its partial product into a
// private buffer, then tpgemm's one-shot or two-shot all-reduce (which copies it into symmetric
// memory as it starts) sums it into D and adds this rank's beta * C. A far shorter all-reduce
// than NCCL's for messages of a few MB (docs/perf.md).
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/allreduce/symm_collective.h"
#include "ops/common/whole_matmul.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class GemmAllReduce final : public OpImpl {
 public:
  explicit GemmAllReduce(const ImplContext& ctx)
      : team_(ctx.team),
        p_(ctx.problem),
        allreduce_(team_, p_.l * p_.m * p_.n, d_dtype(p_),
                   ctx.choice.impl == Impl::kGemmTwoShot ? ops::SymmAlgo::kTwoShot : ops::SymmAlgo::kOneShot) {
    // Local work after the symmetric allocation, so agreed on separately (NOTE [collective construction]).
    team_->agree_local("allocating the matmul's workspace", [&] {
      workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
      partial_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(d_dtype(p_)));
      matmuls_ = gemm::LtMatmulCache(team_->lt);
      matmuls_.get(shape(p_));
    });
  }

  // The matmul writes only this plan's own buffer (nothing the caller owns before the call is
  // agreed on), which the previous call's all-reduce has finished reading (stream order).
  void prologue(const Operands& o, cudaStream_t stream) override {
    const GemmProblem p = call_problem(p_, o);
    matmuls_.get(shape(p)).run(o.a, o.b, nullptr, partial_.get(), p.alpha, 0.0f, workspace_.get(), stream, o.a_scale,
                               o.b_scale);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const GemmProblem p = call_problem(p_, o);
    const bool c = p.has_c && p.beta != 0.0f;
    allreduce_.run(partial_.get(), o.d, c ? o.c : nullptr, p.beta, stream, p.l * p.m * p.n);
  }

 private:
  // The partial product in D's type (e4m3 operands: bf16 or fp16, which the all-reduce sums).
  gemm::MatmulShape shape(const GemmProblem& p) const { return ops::whole_matmul_shape(p, team_->world); }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  ops::SymmCollective allreduce_;
  DeviceBuffer workspace_, partial_;
  gemm::LtMatmulCache matmuls_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_ar_symmetric(const ImplContext& ctx) { return std::make_unique<GemmAllReduce>(ctx); }

}  // namespace tpgemm::detail
