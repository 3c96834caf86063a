// GEMM+ReduceScatter's partial product, laid out the way a reduce-scatter hands it out: W
// contiguous blocks, block r the part of D that rank r owns ([L, M/W, N] along M, [L, M, N/W]
// along N). Along M with L == 1 that is the plain [M, N] product, one matmul; otherwise one
// strided matmul per block. Calls may have fewer rows than the problem (Operands::m). Shared by the baseline (NCCL) and gemm_reducescatter (tpgemm's kernel).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemm/lt_matmul.h"
#include "tpgemm/types.h"

namespace tpgemm::ops {

class PartialBlocks {
 public:
  PartialBlocks() = default;
  PartialBlocks(cublasLtHandle_t lt, const GemmProblem& p, int world);
  // Elements of each block (= of each rank's D) for a call of M rows (0: the problem's M).
  int64_t block_elems(int64_t m = 0) const { return p_.l * (m > 0 ? m : p_.m) * p_.n / world_; }
  // partial (L M N elements of D's type) = alpha * A B in blocks, for a call of M rows (0: the
  // problem's M, else at most that); workspace: gemm::LtMatmul::kWorkspaceBytes; e4m3 A and B
  // with their scales (gemm::LtMatmul::run).
  void run(const void* a, const void* b, void* partial, float alpha, void* workspace, cudaStream_t stream, int64_t m = 0,
           const float* a_scale = nullptr, const float* b_scale = nullptr);

 private:
  GemmProblem p_{};
  int world_ = 1;
  bool one_matmul_ = false;
  gemm::MatmulShape shape(int64_t m) const;
  GemmProblem call(int64_t m) const;  // the problem with a call's M

  gemm::LtMatmulCache matmuls_;
};

}  // namespace tpgemm::ops
