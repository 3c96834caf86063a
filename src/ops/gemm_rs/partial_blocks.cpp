#include "ops/gemm_rs/partial_blocks.h"

#include "plan/problem.h"

namespace tpgemm::ops {

PartialBlocks::PartialBlocks(cublasLtHandle_t lt, const GemmProblem& p, int world)
    : p_(p), world_(world), one_matmul_(p.l == 1 && p.shard_dim == ShardDim::kM), matmuls_(lt) {
  matmuls_.get(shape(p.m));
}

GemmProblem PartialBlocks::call(int64_t m) const {
  GemmProblem q = p_;
  q.m = m;
  return q;
}

gemm::MatmulShape PartialBlocks::shape(int64_t m) const {
  const int64_t mw = m / world_, nw = p_.n / world_;
  gemm::MatmulShape s;
  if (p_.shard_dim == ShardDim::kN) {  // block w = columns [w N/W, (w + 1) N/W) of B
    s = gemm::packed_shape(p_, m, nw);
  } else {  // block w = rows [w M/W, (w + 1) M/W) of A
    s = gemm::packed_shape(p_, one_matmul_ ? m : mw, p_.n);
    s.stride_d = mw * p_.n;
  }
  // A and B in place, in their layouts and strides (a block of A's rows stored [K, M] is a block
  // of its columns, with A's stride).
  s.lda = plan::a_ld(call(m), world_);
  s.ldb = plan::b_ld(p_, world_);
  s.stride_a = plan::a_batch_stride(call(m), world_);
  s.stride_b = plan::b_batch_stride(p_, world_);
  s.a_transposed = p_.a_layout == ALayout::kKM;
  // Block w of a [K, M] A starts w M/W columns in: 16-byte aligned only where M/W elements are.
  s.a_unaligned = s.a_transposed && !one_matmul_ && p_.shard_dim == ShardDim::kM &&
                  mw * static_cast<int64_t>(dtype_size(p_.dtype)) % 16 != 0;
  return s;
}

void PartialBlocks::run(const void* a, const void* b, void* partial, float alpha, void* workspace, cudaStream_t stream,
                        int64_t m, const float* a_scale, const float* b_scale) {
  if (m == 0) m = p_.m;
  const int64_t es = static_cast<int64_t>(dtype_size(p_.dtype)), ds = static_cast<int64_t>(dtype_size(d_dtype(p_)));
  const int64_t W = world_;
  const gemm::LtMatmul& matmul = matmuls_.get(shape(m));
  for (int64_t w = 0; w < (one_matmul_ ? 1 : W); ++w) {
    const char* aw = static_cast<const char*>(a);
    const char* bw = static_cast<const char*>(b);
    if (p_.shard_dim == ShardDim::kN)  // B's columns w N/W..: kn, columns of its rows; nk, its rows
      bw += (p_.b_layout == BLayout::kKN ? w * (p_.n / W) : w * (p_.n / W) * plan::b_ld(p_, W)) * es;
    else  // A's rows w M/W..: mk, its rows; km, columns of its rows
      aw += (p_.a_layout == ALayout::kKM ? w * (m / W) : w * (m / W) * plan::a_ld(call(m), W)) * es;
    // Row-wise and block scales: B's block of columns has its block of b_scale (along N; along M
    // with one batch entry, which they need, the matmul is one). Block: N/W is whole 128-row blocks
    // of the weight, each a row of b_scale_ld(p_) scales.
    const float* bw_scale = b_scale;
    if (p_.shard_dim == ShardDim::kN && p_.scale_mode == ScaleMode::kRow) bw_scale += w * (p_.n / W);
    if (p_.shard_dim == ShardDim::kN && p_.scale_mode == ScaleMode::kBlock)
      bw_scale += w * (p_.n / W / kScaleBlock) * b_scale_ld(p_);
    matmul.run(aw, bw, nullptr, static_cast<char*>(partial) + w * block_elems(m) * ds, alpha, 0.0f, workspace, stream,
               a_scale, bw_scale);
  }
}

}  // namespace tpgemm::ops
