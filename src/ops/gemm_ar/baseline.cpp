// GEMM + AllReduce, no overlap: one cuBLASLt matmul into D, ncclAllReduce in place, and
// D += beta * C when C is given (C is this rank's own, added after the sum).
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/elementwise.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class GemmArBaseline final : public OpImpl {
 public:
  explicit GemmArBaseline(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem) {
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    matmul_ = gemm::LtMatmul(team_->lt, gemm::packed_shape(p_.m, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout));
  }

  void run(const Operands& o, cudaStream_t stream) override {
    matmul_.run(o.a, o.b, nullptr, o.d, p_.alpha, 0.0f, workspace_.get(), stream);
    const int64_t count = p_.l * p_.m * p_.n;
    TPGEMM_NCCL_CHECK(ncclAllReduce(o.d, o.d, static_cast<size_t>(count), ops::nccl_type(p_.dtype), ncclSum, team_->comm, stream));
    if (p_.has_c && p_.beta != 0.0f) ops::add_scaled(o.d, o.c, p_.beta, count, p_.dtype, team_->num_sms, stream);
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  DeviceBuffer workspace_;
  gemm::LtMatmul matmul_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_ar_baseline(const ImplContext& ctx) { return std::make_unique<GemmArBaseline>(ctx); }

}  // namespace tpgemm::detail
