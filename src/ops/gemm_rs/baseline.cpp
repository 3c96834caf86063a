// GEMM + ReduceScatter, no overlap: cuBLASLt into a partial-product buffer, then
// ncclReduceScatter into D (and D += beta * C when C is given).
#include "core/check.h"
#include "core/cuda_raii.h"
#include "ops/common/elementwise.h"
#include "ops/common/nccl_types.h"
#include "ops/gemm_rs/partial_blocks.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class GemmRsBaseline final : public OpImpl {
 public:
  explicit GemmRsBaseline(const ImplContext& ctx)
      : team_(ctx.team),
        p_(ctx.problem),
        blocks_(team_->lt, p_, team_->world),
        partial_(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(d_dtype(p_))),
        workspace_(gemm::LtMatmul::kWorkspaceBytes) {}

  void run(const Operands& o, cudaStream_t stream) override {
    // ncclReduceScatter hands rank r the r-th contiguous piece: PartialBlocks' layout.
    const int64_t count = blocks_.block_elems(o.m);
    blocks_.run(o.a, o.b, partial_.get(), p_.alpha, workspace_.get(), stream, o.m, o.a_scale, o.b_scale);
    const DType dt = d_dtype(p_);  // the partials', summed in it
    TPGEMM_NCCL_CHECK(ncclReduceScatter(partial_.get(), o.d, static_cast<size_t>(count), ops::nccl_type(dt), ncclSum,
                                        team_->comm, stream));
    if (p_.has_c && p_.beta != 0.0f) ops::add_scaled(o.d, o.c, p_.beta, count, dt, team_->num_sms, stream);
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  ops::PartialBlocks blocks_;
  DeviceBuffer partial_, workspace_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_rs_baseline(const ImplContext& ctx) { return std::make_unique<GemmRsBaseline>(ctx); }

}  // namespace tpgemm::detail
