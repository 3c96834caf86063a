// GEMM + ReduceScatter, no overlap: cuBLASLt into a partial-product buffer, then
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
    const int64_t W = team_->world, mw = p_.m / W, nw = p_.n / W;
    along_n_ = p_.shard_dim == ShardDim::kN;
    partial_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(p_.dtype));
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    // ncclReduceScatter hands rank r the r-th contiguous piece, so the partial is laid out
    // [W][L][rank r's D]: along M with L == 1 that is plain [M][N]; otherwise one strided
    // matmul per block (along N: block w = columns [w N/W, (w + 1) N/W) of B).
    one_matmul_ = p_.l == 1 && !along_n_;
    gemm::MatmulShape s;
    if (along_n_) {
      s = gemm::packed_shape(p_.m, nw, p_.k, p_.l, p_.dtype, p_.b_layout);
      s.ldb = p_.b_layout == BLayout::kKN ? p_.n : p_.k;
      s.stride_b = p_.k * p_.n;
    } else {
      s = gemm::packed_shape(one_matmul_ ? p_.m : mw, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
      s.stride_a = p_.m * p_.k;
      s.stride_d = mw * p_.n;
    }
    matmul_ = gemm::LtMatmul(team_->lt, s);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const int64_t W = team_->world, es = static_cast<int64_t>(dtype_size(p_.dtype));
    const int64_t count = p_.l * p_.m * p_.n / W;  // elements of each rank's D
    auto* part = partial_.as<char>();
    for (int64_t w = 0; w < (one_matmul_ ? 1 : W); ++w) {
      const auto* a = static_cast<const char*>(o.a), *b = static_cast<const char*>(o.b);
      if (along_n_)
        b += (p_.b_layout == BLayout::kKN ? w * (p_.n / W) : w * (p_.n / W) * p_.k) * es;
      else
        a += w * (p_.m / W) * p_.k * es;
      matmul_.run(a, b, nullptr, part + w * count * es, p_.alpha, 0.0f, workspace_.get(), stream);
    }
    TPGEMM_NCCL_CHECK(ncclReduceScatter(part, o.d, static_cast<size_t>(count), ops::nccl_type(p_.dtype), ncclSum,
                                        team_->comm, stream));
    if (p_.has_c && p_.beta != 0.0f) ops::add_scaled(o.d, o.c, p_.beta, count, p_.dtype, team_->num_sms, stream);
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  bool along_n_ = false;
  bool one_matmul_ = false;
  DeviceBuffer partial_, workspace_;
  gemm::LtMatmul matmul_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_rs_baseline(const ImplContext& ctx) { return std::make_unique<GemmRsBaseline>(ctx); }

}  // namespace tpgemm::detail
