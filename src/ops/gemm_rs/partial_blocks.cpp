#include "ops/gemm_rs/partial_blocks.h"

namespace tpgemm::ops {

PartialBlocks::PartialBlocks(cublasLtHandle_t lt, const GemmProblem& p, int world)
    : p_(p), world_(world), one_matmul_(p.l == 1 && p.shard_dim == ShardDim::kM) {
  const int64_t mw = p.m / world, nw = p.n / world;
  gemm::MatmulShape s;
  if (p.shard_dim == ShardDim::kN) {  // block w = columns [w N/W, (w + 1) N/W) of B
    s = gemm::packed_shape(p.m, nw, p.k, p.l, p.dtype, p.b_layout);
    s.ldb = p.b_layout == BLayout::kKN ? p.n : p.k;
    s.stride_b = p.k * p.n;
  } else {  // block w = rows [w M/W, (w + 1) M/W) of A
    s = gemm::packed_shape(one_matmul_ ? p.m : mw, p.n, p.k, p.l, p.dtype, p.b_layout);
    s.stride_a = p.m * p.k;
    s.stride_d = mw * p.n;
  }
  matmul_ = gemm::LtMatmul(lt, s);
}

void PartialBlocks::run(const void* a, const void* b, void* partial, float alpha, void* workspace,
                        cudaStream_t stream) const {
  const int64_t es = static_cast<int64_t>(dtype_size(p_.dtype)), W = world_;
  for (int64_t w = 0; w < (one_matmul_ ? 1 : W); ++w) {
    const char* aw = static_cast<const char*>(a);
    const char* bw = static_cast<const char*>(b);
    if (p_.shard_dim == ShardDim::kN)
      bw += (p_.b_layout == BLayout::kKN ? w * (p_.n / W) : w * (p_.n / W) * p_.k) * es;
    else
      aw += w * (p_.m / W) * p_.k * es;
    matmul_.run(aw, bw, nullptr, static_cast<char*>(partial) + w * block_elems() * es, alpha, 0.0f, workspace, stream);
  }
}

}  // namespace tpgemm::ops
