// GEMM + ReduceScatter for small M: the matmul writes its partial product into a private buffer
// in the blocks a reduce-scatter hands out (ops/gemm_rs/partial_blocks.h), then tpgemm's
// reduce-scatter kernel (two-shot's first shot: NVLink stores, the data its own flag) sums each
// rank's block into its D and adds beta * C in the same pass. No overlap: where a matmul is too
// small to cut into chunks, a shorter collective than NCCL's is what is left to gain.
#include "core/cuda_raii.h"
#include "ops/allreduce/symm_collective.h"
#include "ops/gemm_rs/partial_blocks.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class GemmReduceScatter final : public OpImpl {
 public:
  explicit GemmReduceScatter(const ImplContext& ctx)
      : team_(ctx.team), p_(ctx.problem), scatter_(team_, p_.l * p_.m * p_.n, d_dtype(p_), ops::SymmAlgo::kReduceScatter) {
    // Local work after the symmetric allocation, so agreed on separately (NOTE [collective construction]).
    team_->agree_local("allocating the matmul's workspace", [&] {
      blocks_ = ops::PartialBlocks(team_->lt, p_, team_->world);
      partial_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(d_dtype(p_)));
      workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    });
  }

  // The matmul writes only this plan's own buffer (nothing the caller owns before the call is
  // agreed on), which the previous call's reduce-scatter has finished reading (stream order).
  void prologue(const Operands& o, cudaStream_t stream) override {
    blocks_.run(o.a, o.b, partial_.get(), p_.alpha, workspace_.get(), stream, o.m, o.a_scale, o.b_scale);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const GemmProblem p = call_problem(p_, o);
    const bool c = p.has_c && p.beta != 0.0f;
    scatter_.run(partial_.get(), o.d, c ? o.c : nullptr, p.beta, stream, p.l * p.m * p.n);
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  ops::SymmCollective scatter_;
  ops::PartialBlocks blocks_;
  DeviceBuffer partial_, workspace_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_rs_reducescatter(const ImplContext& ctx) {
  return std::make_unique<GemmReduceScatter>(ctx);
}

}  // namespace tpgemm::detail
