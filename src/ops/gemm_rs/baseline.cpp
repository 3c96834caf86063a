// GEMM + ReduceScatter, no overlap: cuBLASLt into a partial-product buffer, then
// ncclReduceScatter into D (and D += beta * C when C is given). NCCL writes its piece packed: a D
// with row or batch strides (GemmProblem::ldd, batch_stride_d) receives it through a staging
// buffer and a copy.
#include "core/check.h"
#include "core/cuda_raii.h"
#include "ops/common/copy_batched.h"
#include "ops/common/elementwise.h"
#include "ops/common/nccl_types.h"
#include "ops/gemm_rs/partial_blocks.h"
#include "ops/op_impl.h"
#include "plan/problem.h"

namespace tpgemm::detail {
namespace {

class GemmRsBaseline final : public OpImpl {
 public:
  explicit GemmRsBaseline(const ImplContext& ctx)
      : team_(ctx.team),
        p_(ctx.problem),
        blocks_(team_->lt, p_, team_->world),
        partial_(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(d_dtype(p_))),
        workspace_(gemm::LtMatmul::kWorkspaceBytes) {
    if (!plan::packed_output(p_, team_->world))
      staging_ = DeviceBuffer(static_cast<size_t>(blocks_.block_elems(p_.m)) * dtype_size(d_dtype(p_)));
  }

  void run(const Operands& o, cudaStream_t stream) override {
    // ncclReduceScatter hands rank r the r-th contiguous piece: PartialBlocks' layout.
    const int64_t count = blocks_.block_elems(o.m);
    blocks_.run(o.a, o.b, partial_.get(), p_.alpha, workspace_.get(), stream, o.m, o.a_scale, o.b_scale);
    const DType dt = d_dtype(p_);  // the partials', summed in it
    void* out = staging_.get() != nullptr ? staging_.get() : o.d;
    TPGEMM_NCCL_CHECK(ncclReduceScatter(partial_.get(), out, static_cast<size_t>(count), ops::nccl_type(dt), ncclSum,
                                        team_->comm, stream));
    const bool add_c = p_.has_c && p_.beta != 0.0f;
    if (staging_.get() == nullptr) {
      if (add_c) ops::add_scaled(o.d, o.c, p_.beta, count, dt, team_->num_sms, stream);
      return;
    }
    // Strided C or D: this rank's rows of D, L entries of call rows x cols, moved to their strides.
    const GemmProblem p = call_problem(p_, o);
    const int W = team_->world;
    const int64_t cols = plan::d_cols(p, W), rows = plan::d_rows(p, W), es = static_cast<int64_t>(dtype_size(dt));
    const int64_t ldd = plan::d_ld(p, W), batch_d = plan::d_batch_stride(p, W);
    ops::copy_matrices(o.d, ldd * es, batch_d * es, out, cols * es, rows * cols * es, cols * es, rows, p.l, stream);
    if (add_c)
      ops::add_scaled_strided(o.d, ldd, batch_d, o.c, plan::c_ld(p, W), plan::c_batch_stride(p, W), p.beta, p.l, rows,
                              cols, dt, team_->num_sms, stream);
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  ops::PartialBlocks blocks_;
  DeviceBuffer partial_, workspace_, staging_;  // staging_: this rank's D packed, where D is not
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_rs_baseline(const ImplContext& ctx) { return std::make_unique<GemmRsBaseline>(ctx); }

}  // namespace tpgemm::detail
