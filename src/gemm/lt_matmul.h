// One cuBLASLt matmul, planned once (descriptors, layouts, algorithm) and run many times.
// Row-major in tpgemm's terms: D[m, n] = alpha * A[m, k] * op(B) + beta * C[m, n].
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "tpgemm/types.h"

namespace tpgemm::gemm {

struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;  // row strides in elements
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;  // between batch entries, in elements
  DType dtype = DType::kBF16;  // of A (and B where b_dtype is unset): bf16, fp16, e4m3 or e5m2 (FP8: B as kNK, scales at run)
  std::optional<DType> b_dtype;  // of B: unset = dtype (FP8 only: e4m3 or e5m2, not both e5m2)
  BLayout b_layout = BLayout::kNK;
  bool a_transposed = false;  // A stored as [k, m] row-major (lda its row stride)
  // A's address may be aligned to its element only (a block of columns of a [k, m] A; NOTE
  // [operand alignment])
  bool a_unaligned = false;
  std::optional<DType> out_dtype;  // of C and D: unset = dtype (fp32 for the reference checks)
  // FP8: kRow, a scale per row of A and per column of D; kBlock, per 1 x 128 block of A and 128 x 128
  // block of B (the layouts of types.h, for this matmul's m, n and k)
  ScaleMode scale_mode = ScaleMode::kTensor;
  bool has_c = false;
  int sm_count = 0;  // > 0: ask cuBLASLt to use at most this many SMs (leaves the rest to communication)
  bool operator==(const MatmulShape&) const = default;
};

inline DType out_type(const MatmulShape& s) { return s.out_dtype.value_or(s.dtype); }
inline DType b_type(const MatmulShape& s) { return s.b_dtype.value_or(s.dtype); }

// Packed row-major operands: ld = row length, batch strides = matrix sizes.
MatmulShape packed_shape(int64_t m, int64_t n, int64_t k, int64_t batch, DType dtype, BLayout b_layout);
// The same for an m x n x p.k matmul in problem p's batch count, B layout and types (dtype,
// out_dtype, scale_mode): where every implementation's matmul starts from.
MatmulShape packed_shape(const GemmProblem& p, int64_t m, int64_t n);

class LtMatmul {
 public:
  static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

  LtMatmul() = default;
  LtMatmul(cublasLtHandle_t handle, const MatmulShape& shape);
  ~LtMatmul();
  LtMatmul(LtMatmul&&) noexcept;
  LtMatmul& operator=(LtMatmul&&) noexcept;
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;

  // `workspace` holds kWorkspaceBytes and is not used concurrently by another stream. FP8
  // operands take `a_scale` and `b_scale`, 16-byte aligned device pointers: one fp32 each
  // (D = alpha a_scale b_scale A B + beta C), or with ScaleMode::kRow m and n of them
  // (D[i][j] = alpha a_scale[i] b_scale[j] (A B)[i][j] + beta C[i][j]), or with kBlock one per block
  // (each 128-column piece of K's products scaled by its blocks' two).
  void run(const void* a, const void* b, const void* c, void* d, float alpha, float beta, void* workspace,
           cudaStream_t stream, const float* a_scale = nullptr, const float* b_scale = nullptr) const;
  const MatmulShape& shape() const { return shape_; }

 private:
  void release() noexcept;
  cublasLtMatmulAlgo_t best_algo(uint32_t alignment) const;
  void set_scales(const float* a_scale, const float* b_scale) const;

  cublasLtHandle_t handle_ = nullptr;
  MatmulShape shape_{};
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  // NOTE [operand alignment]: cuBLASLt's heuristic assumes 256-byte aligned operands unless told
  // otherwise; tpgemm only promises 16. We keep the best algorithm for each case and pick per call;
  // with MatmulShape::a_unaligned also one for operands aligned to their element only.
  cublasLtMatmulAlgo_t algo_aligned_{};
  cublasLtMatmulAlgo_t algo_16b_{};
  cublasLtMatmulAlgo_t algo_unaligned_{};
};

// Matmuls of several shapes, each planned on its first use: for the implementations whose calls
// vary in M (Operands::m). Planning is host work only (descriptors and cuBLASLt's heuristic, tens
// of microseconds), so it may happen while a stream is captured.
class LtMatmulCache {
 public:
  LtMatmulCache() = default;
  explicit LtMatmulCache(cublasLtHandle_t handle) : handle_(handle) {}
  const LtMatmul& get(const MatmulShape& shape);

 private:
  static constexpr size_t kMaxPlans = 64;  // then the oldest goes: a serving loop sees many M
  cublasLtHandle_t handle_ = nullptr;
  std::vector<std::unique_ptr<LtMatmul>> plans_;  // oldest first
};

}  // namespace tpgemm::gemm
