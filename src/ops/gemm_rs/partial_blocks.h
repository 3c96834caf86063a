// GEMM+ReduceScatter's partial product, laid out the way a reduce-scatter hands it out: W
// contiguous blocks, block r the part of D that rank r owns ([L, M/W, N] along M, [L, M, N/W]
// along N). Along M with L == 1 that is the plain [M, N] product, one matmul; otherwise one
// strided matmul per block. Shared by the baseline (NCCL) and gemm_reducescatter (tpgemm's kernel).
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
  int64_t block_elems() const { return p_.l * p_.m * p_.n / world_; }  // = elements of each rank's D
  // partial (L M N elements) = alpha * A B in blocks; workspace: gemm::LtMatmul::kWorkspaceBytes.
  void run(const void* a, const void* b, void* partial, float alpha, void* workspace, cudaStream_t stream) const;

 private:
  GemmProblem p_{};
  int world_ = 1;
  bool one_matmul_ = false;
  gemm::LtMatmul matmul_;
};

}  // namespace tpgemm::ops
