// Small elementwise kernels the implementations share.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tpgemm/types.h"

namespace tpgemm::ops {

// d[i] += beta * c[i] for i < count (count a multiple of 8, 16-byte aligned pointers), in fp32.
void add_scaled(void* d, const void* c, float beta, int64_t count, DType dtype, int num_sms, cudaStream_t stream);

// For each of `l` batch entries of `rows` x `n` elements: rows [row0, row0 + nrows) of d get
// beta * c added, in fp32 (n a multiple of 8).
void add_scaled_rows(void* d, const void* c, float beta, int64_t l, int64_t rows, int64_t n, int64_t row0, int64_t nrows,
                     DType dtype, int num_sms, cudaStream_t stream);

// d[b * batch_d + i * ld_d + j] += beta * c[b * batch_c + i * ld_c + j] for b < l, i < rows, j < cols
// (cols a multiple of 8; rows 16-byte aligned), in fp32: C and D with row and batch strides
// (GemmProblem::ldc, ldd, batch_stride_c, batch_stride_d).
void add_scaled_strided(void* d, int64_t ld_d, int64_t batch_d, const void* c, int64_t ld_c, int64_t batch_c, float beta,
                        int64_t l, int64_t rows, int64_t cols, DType dtype, int num_sms, cudaStream_t stream);

}  // namespace tpgemm::ops
