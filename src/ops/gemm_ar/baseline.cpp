// GEMM + AllReduce, no overlap: one cuBLASLt matmul into D, ncclAllReduce in place, and
// D += beta * C when C is given (C is this rank's own, added after the sum).
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/elementwise.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"
#include "plan/problem.h"

namespace tpgemm::detail {
namespace {

class GemmArBaseline final : public OpImpl {
 public:
  explicit GemmArBaseline(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem), matmuls_(team_->lt) {
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    matmuls_.get(shape(p_));
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const GemmProblem p = call_problem(p_, o);
    matmuls_.get(shape(p)).run(o.a, o.b, nullptr, o.d, p.alpha, 0.0f, workspace_.get(), stream, o.a_scale, o.b_scale);
    const int64_t count = p.l * p.m * p.n;
    const DType dt = d_dtype(p);  // the partials', summed in it
    TPGEMM_NCCL_CHECK(ncclAllReduce(o.d, o.d, static_cast<size_t>(count), ops::nccl_type(dt), ncclSum, team_->comm, stream));
    if (p.has_c && p.beta != 0.0f) ops::add_scaled(o.d, o.c, p.beta, count, dt, team_->num_sms, stream);
  }

 private:
  // A and B read in place, in their layouts and strides (GemmProblem::a_layout, lda, ldb).
  gemm::MatmulShape shape(const GemmProblem& p) const {
    gemm::MatmulShape s = gemm::packed_shape(p, p.m, p.n);
    s.lda = plan::a_ld(p, team_->world);
    s.ldb = plan::b_ld(p, team_->world);
    s.a_transposed = p.a_layout == ALayout::kKM;
    return s;
  }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  DeviceBuffer workspace_;
  gemm::LtMatmulCache matmuls_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_ar_baseline(const ImplContext& ctx) { return std::make_unique<GemmArBaseline>(ctx); }

}  // namespace tpgemm::detail
