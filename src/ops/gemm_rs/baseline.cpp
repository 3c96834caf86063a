// GEMM + ReduceScatter, no overlap: one cuBLASLt matmul into a partial-product buffer, then
// ncclReduceScatter into D (and D += beta * C when C is given).
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/elementwise.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class GemmRsBaseline final : public OpImpl {
 public:
  explicit GemmRsBaseline(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem) {
    const int64_t W = team_->world, mw = p_.m / W;
    partial_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(p_.dtype));
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    // ncclReduceScatter hands rank r the r-th contiguous piece, so the partial is laid out
    // [W][L][M/W][N]: with L == 1 that is plain [M][N]; with L > 1, one strided matmul per block.
    gemm::MatmulShape s = gemm::packed_shape(p_.l == 1 ? p_.m : mw, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
    s.stride_a = p_.m * p_.k;
    s.stride_d = mw * p_.n;
    matmul_ = gemm::LtMatmul(team_->lt, s);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const int64_t W = team_->world, mw = p_.m / W, es = static_cast<int64_t>(dtype_size(p_.dtype));
    auto* part = partial_.as<char>();
    const int64_t blocks = p_.l == 1 ? 1 : W;
    for (int64_t w = 0; w < blocks; ++w)
      matmul_.run(static_cast<const char*>(o.a) + w * mw * p_.k * es, o.b, nullptr, part + w * p_.l * mw * p_.n * es,
                  p_.alpha, 0.0f, workspace_.get(), stream);
    const int64_t count = p_.l * mw * p_.n;
    TPGEMM_NCCL_CHECK(ncclReduceScatter(part, o.d, static_cast<size_t>(count), ops::nccl_type(p_.dtype), ncclSum,
                                        team_->comm, stream));
    if (p_.has_c && p_.beta != 0.0f) ops::add_scaled(o.d, o.c, p_.beta, count, p_.dtype, team_->num_sms, stream);
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  DeviceBuffer partial_, workspace_;
  gemm::LtMatmul matmul_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_rs_baseline(const ImplContext& ctx) { return std::make_unique<GemmRsBaseline>(ctx); }

}  // namespace tpgemm::detail
