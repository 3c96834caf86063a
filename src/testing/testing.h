// Checking support shared by the tests and tpgemm-bench --check: reproducible random data
// that any rank can regenerate, poisoned outputs, an fp32 reference GEMM, and the relative
// error ||out - ref|| / ||ref|| computed in double on the device.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <optional>

#include "tpgemm/types.h"

namespace tpgemm::testing {

// Element (b, i, j) of a [l][rows][cols] block gets the value of element
// (b, row_offset + i, j) of a [l][total_rows][cols] matrix drawn from `seed`: uniform in
// [-1, 1), rounded to dtype. So a shard filled with its row offset equals the same rows of
// the whole matrix filled at once.
void fill_random(void* p, DType dtype, int64_t l, int64_t rows, int64_t cols, int64_t row_offset, int64_t total_rows,
                 uint64_t seed, cudaStream_t stream);

// Every element becomes NaN (all bits set, in bf16, fp16 and fp32): anything left unwritten fails a check.
void poison(void* p, int64_t count, DType dtype, cudaStream_t stream);

// dst[j * ld + i] = src[i * cols + j]: a packed [rows, cols] matrix stored transposed, its rows
// `ld` elements apart (ld >= rows), for an element of dtype's size.
void transpose_into(void* dst, int64_t ld, const void* src, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream);

// ref[b][i][j] (fp32, [l][m][n]) += alpha * sum_k A[b][i][k] * B[b] (B as `layout`), plus
// beta * C[b][i][j] when c is given (in dtype; not for FP8: add it with reference_add). A is in
// dtype, B in b_dtype (unset: dtype; they differ only as two FP8 types). kNaive
// is a plain CUDA kernel (independent of cuBLAS, for small test shapes); kCublasLt uses cuBLASLt
// with fp32 output (for benchmark shapes). `row_scale` (device, [m], optional) scales row i of
// every batch entry's product by row_scale[i], `col_scale` ([n]) column j by col_scale[j]: the
// gathered FP8 A, each rank's rows with its own scale, and row-wise FP8 scales (the naive
// kernel computes them; cuBLASLt where both are given for FP8 with l = 1, 16-byte aligned: the
// benchmark's check, through the scale mode the baseline uses too, so the tests, naive, are what
// proves the orientation of the vectors).
enum class RefEngine { kNaive, kCublasLt };
void reference_gemm(const void* a, const void* b, const void* c, float* ref, int64_t m, int64_t n, int64_t k, int64_t l,
                    DType dtype, BLayout layout, float alpha, float beta, RefEngine engine, cublasLtHandle_t lt,
                    cudaStream_t stream, const float* row_scale = nullptr, const float* col_scale = nullptr,
                    std::optional<DType> b_dtype = std::nullopt);

// e4m3 A [m, k] and B [n, k] with block scales (ScaleMode::kBlock, one batch entry): ref[i][j]
// (fp32) += alpha * sum over K blocks kb of a_scale[kb * m + i] * b_scale[(j / 128) * b_scale_ld + kb]
// * (the products of A's row i and B's row j over kb's 128 columns of K). kNaive is a plain CUDA
// kernel; kCublasLt (benchmark shapes) a cuBLASLt matmul per K block with row-wise scales (its
// outer-vector mode, not the block modes the baseline uses).
void reference_gemm_blocks(const void* a, const void* b, float* ref, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a_scale, const float* b_scale, int64_t b_scale_ld, RefEngine engine,
                           cublasLtHandle_t lt, cudaStream_t stream);

// ref[i] += beta * x[i] for i < count (x in dtype: bf16, fp16 or fp32).
void reference_add(float* ref, const void* x, float beta, int64_t count, DType dtype, cudaStream_t stream);

// An all-reduce's reference: ref (fp32, count) = the sum, in rank order, of what each rank q <
// world draws as its input with fill_random(in, dtype, 1, 1, count, 0, 1, seed + q, stream).
void reference_sum_of_ranks(float* ref, int64_t count, DType dtype, int world, uint64_t seed, cudaStream_t stream);

struct Diff {
  double rel_err = 0;      // ||out - ref|| / ||ref||
  int64_t nonfinite = 0;   // elements of out that are NaN or Inf (poison left over, or overflow)
  double ref_norm = 0;
  int64_t written_outside = 0;  // elements between D's rows (GemmProblem::ldd) that are no longer poison
  bool passes(double eps) const { return nonfinite == 0 && written_outside == 0 && rel_err <= eps && ref_norm > 0; }
};

// Compares `l` spans of `span` elements: out[b * out_stride + i] against
// ref[b * ref_stride + ref_offset + i]. Synchronises `stream`.
Diff compare(const void* out, DType dtype, const float* ref, int64_t l, int64_t span, int64_t out_stride,
             int64_t ref_stride, int64_t ref_offset, cudaStream_t stream);

// The default tolerance of a check per output type (bf16 and fp16 outputs are rounded to 16
// bits; fp32 ones only summed in another order).
double default_eps(DType dtype);
// The tolerance of a GEMM's D: its output type's, at least 2e-3 for FP8 operands (the FP8
// tensor cores accumulate in fewer bits than fp32 between cuBLASLt's promotions).
double default_eps(const GemmProblem& p);

}  // namespace tpgemm::testing
