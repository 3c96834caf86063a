// AllGather + GEMM, no overlap: ncclAllGather of the A shards (along N: of the B shards), then
// cuBLASLt. The reference every other implementation is checked and timed against.
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/copy_batched.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"
#include "plan/problem.h"

namespace tpgemm::detail {
namespace {

class AgGemmBaseline final : public OpImpl {
 public:
  explicit AgGemmBaseline(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem), matmuls_(team_->lt) {
    along_n_ = p_.shard_dim == ShardDim::kN;
    gathered_ = DeviceBuffer(static_cast<size_t>(p_.l * (along_n_ ? p_.n : p_.m) * p_.k) * dtype_size(p_.dtype));
    workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
    // ncclAllGather lays the shards out rank by rank: [W][L][shard]. With L == 1 that is
    // exactly A[M][K] (along N, for B as [N, K]: B[N][K]); otherwise one strided matmul per
    // rank's block. e4m3 shards carry each rank's own scale, gathered beside them. Tensor-wise:
    // one matmul per block, each with its scale; cuBLASLt reads a scale only from a 16-byte
    // aligned address, so each rank's sits at the head of a 16-byte slot (copied there, then the
    // slots gathered). Row-wise: the scales of the gathered rows (columns, along N) gathered into
    // one vector, and one matmul. Block: likewise, but A's scales run K block by K block, each
    // block's rows in order (types.h), so the gathered [W][K/128][M/W] is repacked into
    // [K/128][M]; along N, B's scales are whole rows per 128 rows of B, gathered as they are.
    fp8_ = is_fp8(p_.dtype);
    row_scales_ = fp8_ && p_.scale_mode == ScaleMode::kRow;
    block_scales_ = fp8_ && p_.scale_mode == ScaleMode::kBlock;
    // A stored [K, M]: the gathered blocks are [K, M/W] each, one matmul per block. A shard stored
    // with strides (lda, ldb, their batch strides) is packed into staging_ first: NCCL gathers
    // contiguous bytes.
    gathered_km_ = !along_n_ && p_.a_layout == ALayout::kKM;
    one_matmul_ = p_.l == 1 && (!along_n_ || p_.b_layout == BLayout::kNK) && (!fp8_ || row_scales_ || block_scales_) &&
                  !gathered_km_;
    if (!shard_packed(p_))
      staging_ =
          DeviceBuffer(static_cast<size_t>(p_.l * (along_n_ ? p_.n : p_.m) / team_->world * p_.k) * dtype_size(p_.dtype));
    if (fp8_) {
      // Block along M: the repacked scales, then where they are gathered (16-byte aligned: M % 4 == 0).
      const size_t floats = row_scales_     ? static_cast<size_t>(along_n_ ? p_.n : p_.m)
                            : block_scales_ ? static_cast<size_t>(gathered_scales(p_) * (along_n_ ? 1 : 2))
                                            : kScaleSlot * static_cast<size_t>(team_->world + 1);
      scales_ = DeviceBuffer(floats * sizeof(float));
      team_->zero_now(scales_.get(), floats * sizeof(float));  // the slots' unused floats too
    }
    matmuls_.get(shape(p_));  // the plan's M now, any other on its first call
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const GemmProblem p = call_problem(p_, o);
    const int64_t W = team_->world, es = static_cast<int64_t>(dtype_size(p.dtype));
    const int64_t ds = static_cast<int64_t>(dtype_size(d_dtype(p)));
    const int64_t shard = (along_n_ ? p.n : p.m) / W * p.k;  // elements per batch entry
    // With one batch entry the gathered layout is A's own [M, K]: gather straight into the
    // caller's A_gathered when it wants one (PlanOptions::return_gathered_a).
    const bool into_caller = o.a_gathered != nullptr && !along_n_ && p.l == 1;
    auto* g = into_caller ? static_cast<char*>(o.a_gathered) : gathered_.as<char>();
    const bool tensor_scales = fp8_ && !row_scales_ && !block_scales_;
    // Row-wise and block: each rank's scales of the gathered operand, and where they are gathered.
    const int64_t scale_count = gathered_scales(p) / W;
    float* scales_in = block_scales_ && !along_n_ ? scales_.as<float>() + gathered_scales(p_) : scales_.as<float>();
    float* own_slot = tensor_scales ? scales_.as<float>() + W * kScaleSlot : nullptr;  // after the W slots
    const void* sent = shard_as_sent(p, o, stream);
    if (tensor_scales)
      TPGEMM_CUDA_CHECK(cudaMemcpyAsync(own_slot, along_n_ ? o.b_scale : o.a_scale, sizeof(float),
                                        cudaMemcpyDeviceToDevice, stream));
    // e4m3: the scales and the shards in one NCCL group, one launch.
    if (fp8_) TPGEMM_NCCL_CHECK(ncclGroupStart());
    try {
      if (row_scales_ || block_scales_)
        TPGEMM_NCCL_CHECK(ncclAllGather(along_n_ ? o.b_scale : o.a_scale, scales_in, static_cast<size_t>(scale_count),
                                        ncclFloat32, team_->comm, stream));
      else if (fp8_)
        TPGEMM_NCCL_CHECK(ncclAllGather(own_slot, scales_.get(), kScaleSlot, ncclFloat32, team_->comm, stream));
      TPGEMM_NCCL_CHECK(ncclAllGather(sent, g, static_cast<size_t>(p.l * shard), ops::nccl_type(p.dtype), team_->comm,
                                      stream));
    } catch (...) {
      if (fp8_) ncclGroupEnd();  // the group closes whatever failed inside it
      throw;
    }
    if (fp8_) TPGEMM_NCCL_CHECK(ncclGroupEnd());
    if (block_scales_ && !along_n_)  // rank w's [K/128][M/W] to rows w M/W.. of each K block of [K/128][M]
      for (int64_t w = 0; w < W; ++w)
        ops::copy_rows(scales_.get(), p.m, w * (p.m / W), scales_in + w * scale_count, p.m / W, 0, p.m / W,
                       sizeof(float), scale_k_blocks(p), stream);
    const gemm::LtMatmul& matmul = matmuls_.get(shape(p));
    for (int64_t w = 0; w < (one_matmul_ ? 1 : W); ++w) {
      const char* block = g + w * p.l * shard * es;
      // Rank w's block of D (and C): its columns along N, its rows along M, rows ldd (ldc) apart.
      const int64_t d_off = (along_n_ ? w * (p.n / W) : w * (p.m / W) * plan::d_ld(p, W)) * ds;
      const int64_t c_off = (along_n_ ? w * (p.n / W) : w * (p.m / W) * plan::c_ld(p, W)) * ds;
      const char* c = o.c ? static_cast<const char*>(o.c) + c_off : nullptr;
      // The gathered operand's scale for rank w's block (row-wise and block: all of them, one matmul).
      const float* block_scale = row_scales_ || block_scales_ ? scales_.as<float>()
                                 : fp8_      ? scales_.as<float>() + w * kScaleSlot
                                             : nullptr;
      matmul.run(along_n_ ? o.a : block, along_n_ ? block : o.b, c, static_cast<char*>(o.d) + d_off, p.alpha, p.beta,
                 workspace_.get(), stream, along_n_ ? o.a_scale : block_scale, along_n_ ? block_scale : o.b_scale);
    }
    if (o.a_gathered != nullptr && !into_caller)  // [W][L][M/W rows] to [L][M rows]
      for (int64_t w = 0; w < W; ++w)
        ops::copy_rows(o.a_gathered, p.m, w * (p.m / W), g + w * p.l * shard * es, p.m / W, 0, p.m / W, p.k * es, p.l,
                       stream);
  }

 private:
  // This rank's shard of the gathered operand (A along M, B along N) as stored: rows of `row`
  // elements, `ld` apart, entries `batch` apart.
  struct Shard {
    int64_t rows, row, ld, batch;
  };
  Shard shard_of(const GemmProblem& p) const {
    const int W = team_->world;
    if (along_n_) return {plan::b_stored_rows(p, W), plan::b_stored_row(p, W), plan::b_ld(p, W), plan::b_batch_stride(p, W)};
    return {plan::a_stored_rows(p, W), plan::a_stored_row(p, W), plan::a_ld(p, W), plan::a_batch_stride(p, W)};
  }
  // (a batch stride given is kept by calls of fewer rows: packed or not, it is copied)
  bool shard_packed(const GemmProblem& p) const {
    const Shard s = shard_of(p);
    return s.ld == s.row && (p.l == 1 || (along_n_ ? p.batch_stride_b : p.batch_stride_a) == 0);
  }

  // The shard packed: as the caller's pointer, or copied into staging_ where its rows or entries
  // are further apart than they are long.
  const void* shard_as_sent(const GemmProblem& p, const Operands& o, cudaStream_t stream) const {
    const void* x = along_n_ ? o.b : o.a;
    if (shard_packed(p)) return x;
    const Shard s = shard_of(p);
    const size_t es = dtype_size(p.dtype);
    ops::copy_matrices(staging_.get(), s.row * es, s.rows * s.row * es, x, s.ld * es, s.batch * es, s.row * es, s.rows,
                       p.l, stream);
    return staging_.get();
  }

  // The matmul of one rank's block (or of the whole gathered A: one_matmul_) for the call's M.
  gemm::MatmulShape shape(const GemmProblem& p) const {
    const int64_t W = team_->world, mw = p.m / W, nw = p.n / W;
    gemm::MatmulShape s;
    if (along_n_) {  // block w: columns [w N/W, (w + 1) N/W) of D; A in place
      s = gemm::packed_shape(p, p.m, one_matmul_ ? p.n : nw);
      s.stride_b = nw * p.k;
      s.lda = plan::a_ld(p, W);
      s.stride_a = plan::a_batch_stride(p, W);
      s.a_transposed = p.a_layout == ALayout::kKM;
    } else {  // block w: rows [w M/W, (w + 1) M/W) of D; B in place
      s = gemm::packed_shape(p, one_matmul_ ? p.m : mw, p.n);
      s.stride_a = mw * p.k;
      s.ldb = plan::b_ld(p, W);
      s.stride_b = plan::b_batch_stride(p, W);
      if (gathered_km_) s.lda = mw, s.a_transposed = true;  // the block as sent: [K, M/W]
    }
    s.ldc = plan::c_ld(p, W);
    s.ldd = plan::d_ld(p, W);
    s.stride_c = plan::c_batch_stride(p, W);
    s.stride_d = plan::d_batch_stride(p, W);
    s.has_c = p.has_c;
    return s;
  }

  // Row-wise and block: the scales of the gathered operand, every rank's, for problem p's M.
  int64_t gathered_scales(const GemmProblem& p) const {
    const OperandSizes n = operand_sizes(p, team_->world);
    return (along_n_ ? n.b_scale : n.a_scale) * team_->world;
  }

  static constexpr int64_t kScaleSlot = 4;  // floats: 16 bytes

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  bool along_n_ = false;
  bool one_matmul_ = false;
  bool fp8_ = false;
  bool row_scales_ = false;  // e4m3 with ScaleMode::kRow
  bool block_scales_ = false;  // e4m3 with ScaleMode::kBlock
  bool gathered_km_ = false;  // the gathered A's blocks are [K, M/W] (a_layout=km)
  // scales_ (e4m3): a 16-byte slot per rank with its scale of the gathered operand, then this
  // rank's; row-wise, the gathered operand's scale vector; block, its scales (along M: repacked,
  // then as gathered)
  DeviceBuffer gathered_, workspace_, scales_, staging_;
  gemm::LtMatmulCache matmuls_;
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_baseline(const ImplContext& ctx) { return std::make_unique<AgGemmBaseline>(ctx); }

}  // namespace tpgemm::detail
