// AllGather + GEMM, no overlap: ncclAllGather of the A shards, then one cuBLASLt matmul.
// The reference every other implementation is checked and timed against.
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class AgGemmBaseline final : public OpImpl {
 public:
  explicit AgGemmBaseline(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem) {
    const int64_t W = team_->world, mw = p_.m / W;
    gathered_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.k) * dtype_size(p_.dtype));
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    // ncclAllGather lays the shards out rank by rank: [W][L][M/W][K]. With L == 1 that is
    // exactly A[M][K]; with L > 1 each rank's block is a strided batch of its own.
    gemm::MatmulShape s = gemm::packed_shape(p_.l == 1 ? p_.m : mw, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
    s.stride_a = mw * p_.k;
    s.stride_c = s.stride_d = p_.m * p_.n;
    s.has_c = p_.has_c;
    matmul_ = gemm::LtMatmul(team_->lt, s);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const int64_t W = team_->world, mw = p_.m / W, es = static_cast<int64_t>(dtype_size(p_.dtype));
    auto* g = gathered_.as<char>();
    TPGEMM_NCCL_CHECK(ncclAllGather(o.a, g, static_cast<size_t>(p_.l * mw * p_.k), ops::nccl_type(p_.dtype), team_->comm, stream));
    const int64_t blocks = p_.l == 1 ? 1 : W;
    for (int64_t w = 0; w < blocks; ++w) {
      const int64_t d_off = w * mw * p_.n * es;
      matmul_.run(g + w * p_.l * mw * p_.k * es, o.b, o.c ? static_cast<const char*>(o.c) + d_off : nullptr,
                  static_cast<char*>(o.d) + d_off, p_.alpha, p_.beta, workspace_.get(), stream);
    }
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  DeviceBuffer gathered_, workspace_;
  gemm::LtMatmul matmul_;
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_baseline(const ImplContext& ctx) { return std::make_unique<AgGemmBaseline>(ctx); }

}  // namespace tpgemm::detail
