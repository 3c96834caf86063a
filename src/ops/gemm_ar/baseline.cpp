// GEMM + AllReduce, no overlap: one cuBLASLt matmul into D, ncclAllReduce in place, and
// D += beta * C when C is given (C is this rank's own, added after the sum). NCCL sums packed
// buffers: a D with row or batch strides (GemmProblem::ldd, batch_stride_d) is summed in a staging
// buffer, then copied.
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/copy_batched.h"
#include "ops/common/elementwise.h"
#include "ops/common/nccl_types.h"
#include "ops/common/whole_matmul.h"
#include "ops/op_impl.h"
#include "plan/problem.h"

namespace tpgemm::detail {
namespace {

class GemmArBaseline final : public OpImpl {
 public:
  explicit GemmArBaseline(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem), matmuls_(team_->lt) {
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    if (!plan::packed_output(p_, team_->world))
      staging_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(d_dtype(p_)));
    matmuls_.get(shape(p_));
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const GemmProblem p = call_problem(p_, o);
    void* sum = staging_.get() != nullptr ? staging_.get() : o.d;
    matmuls_.get(shape(p)).run(o.a, o.b, nullptr, sum, p.alpha, 0.0f, workspace_.get(), stream, o.a_scale, o.b_scale);
    const int64_t count = p.l * p.m * p.n;
    const DType dt = d_dtype(p);  // the partials', summed in it
    TPGEMM_NCCL_CHECK(ncclAllReduce(sum, sum, static_cast<size_t>(count), ops::nccl_type(dt), ncclSum, team_->comm, stream));
    const bool add_c = p.has_c && p.beta != 0.0f;
    if (staging_.get() == nullptr) {
      if (add_c) ops::add_scaled(o.d, o.c, p.beta, count, dt, team_->num_sms, stream);
      return;
    }
    const int W = team_->world;
    const int64_t es = static_cast<int64_t>(dtype_size(dt)), ldd = plan::d_ld(p, W), batch_d = plan::d_batch_stride(p, W);
    ops::copy_matrices(o.d, ldd * es, batch_d * es, sum, p.n * es, p.m * p.n * es, p.n * es, p.m, p.l, stream);
    if (add_c)
      ops::add_scaled_strided(o.d, ldd, batch_d, o.c, plan::c_ld(p, W), plan::c_batch_stride(p, W), p.beta, p.l, p.m,
                              p.n, dt, team_->num_sms, stream);
  }

 private:
  gemm::MatmulShape shape(const GemmProblem& p) const { return ops::whole_matmul_shape(p, team_->world); }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  DeviceBuffer workspace_, staging_;  // staging_: the packed sum, where D is not
  gemm::LtMatmulCache matmuls_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_ar_baseline(const ImplContext& ctx) { return std::make_unique<GemmArBaseline>(ctx); }

}  // namespace tpgemm::detail
