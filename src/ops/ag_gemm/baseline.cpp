// AllGather + GEMM, no overlap: ncclAllGather of the A shards (along N: of the B shards), then
// cuBLASLt. The reference every other implementation is checked and timed against.
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/copy_batched.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class AgGemmBaseline final : public OpImpl {
 public:
  explicit AgGemmBaseline(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem) {
    const int64_t W = team_->world, mw = p_.m / W, nw = p_.n / W;
    along_n_ = p_.shard_dim == ShardDim::kN;
    gathered_ = DeviceBuffer(static_cast<size_t>(p_.l * (along_n_ ? p_.n : p_.m) * p_.k) * dtype_size(p_.dtype));
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    // ncclAllGather lays the shards out rank by rank: [W][L][shard]. With L == 1 that is
    // exactly A[M][K] (along N, for B as [N, K]: B[N][K]); otherwise one strided matmul per
    // rank's block.
    one_matmul_ = p_.l == 1 && (!along_n_ || p_.b_layout == BLayout::kNK);
    gemm::MatmulShape s;
    if (along_n_) {  // block w: columns [w N/W, (w + 1) N/W) of D
      s = gemm::packed_shape(p_.m, one_matmul_ ? p_.n : nw, p_.k, p_.l, p_.dtype, p_.b_layout);
      s.stride_b = nw * p_.k;
      s.ldc = s.ldd = p_.n;
    } else {  // block w: rows [w M/W, (w + 1) M/W) of D
      s = gemm::packed_shape(one_matmul_ ? p_.m : mw, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
      s.stride_a = mw * p_.k;
    }
    s.stride_c = s.stride_d = p_.m * p_.n;
    s.has_c = p_.has_c;
    matmul_ = gemm::LtMatmul(team_->lt, s);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const int64_t W = team_->world, es = static_cast<int64_t>(dtype_size(p_.dtype));
    const int64_t shard = (along_n_ ? p_.n : p_.m) / W * p_.k;  // elements per batch entry
    // With one batch entry the gathered layout is A's own [M, K]: gather straight into the
    // caller's A_gathered when it wants one (PlanOptions::return_gathered_a).
    const bool into_caller = o.a_gathered != nullptr && !along_n_ && p_.l == 1;
    auto* g = into_caller ? static_cast<char*>(o.a_gathered) : gathered_.as<char>();
    TPGEMM_NCCL_CHECK(ncclAllGather(along_n_ ? o.b : o.a, g, static_cast<size_t>(p_.l * shard), ops::nccl_type(p_.dtype),
                                    team_->comm, stream));
    for (int64_t w = 0; w < (one_matmul_ ? 1 : W); ++w) {
      const char* block = g + w * p_.l * shard * es;
      const int64_t d_off = (along_n_ ? w * (p_.n / W) : w * (p_.m / W) * p_.n) * es;
      const char* c = o.c ? static_cast<const char*>(o.c) + d_off : nullptr;
      matmul_.run(along_n_ ? o.a : block, along_n_ ? block : o.b, c, static_cast<char*>(o.d) + d_off, p_.alpha, p_.beta,
                  workspace_.get(), stream);
    }
    if (o.a_gathered != nullptr && !into_caller)  // [W][L][M/W rows] to [L][M rows]
      for (int64_t w = 0; w < W; ++w)
        ops::copy_rows(o.a_gathered, p_.m, w * (p_.m / W), g + w * p_.l * shard * es, p_.m / W, 0, p_.m / W, p_.k * es,
                       p_.l, stream);
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  bool along_n_ = false;
  bool one_matmul_ = false;
  DeviceBuffer gathered_, workspace_;
  gemm::LtMatmul matmul_;
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_baseline(const ImplContext& ctx) { return std::make_unique<AgGemmBaseline>(ctx); }

}  // namespace tpgemm::detail
