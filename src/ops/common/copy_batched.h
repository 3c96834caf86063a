// One copy-engine transfer of the same byte range out of every batch entry (the operands'
// outermost dimension): a plain copy for one entry, a 2D copy (one row per entry) for several.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/check.h"

namespace tpgemm::ops {

// `width` bytes from src + b * src_pitch to dst + b * dst_pitch, for b < batches (batch entries,
// or the rows of a matrix whose rows are a pitch apart).
inline void copy_batched(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, int64_t batches,
                         cudaStream_t stream) {
  if (batches == 1)
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, stream));
  else
    TPGEMM_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, static_cast<size_t>(batches),
                                        cudaMemcpyDeviceToDevice, stream));
}

// Rows [src_row, src_row + rows) of every batch entry of a packed [batches][src_rows] tensor of
// `row_bytes`-byte rows to rows [dst_row, ...) of a packed [batches][dst_rows] one.
inline void copy_rows(void* dst, int64_t dst_rows, int64_t dst_row, const void* src, int64_t src_rows, int64_t src_row,
                      int64_t rows, int64_t row_bytes, int64_t batches, cudaStream_t stream) {
  if (rows <= 0) return;
  copy_batched(static_cast<char*>(dst) + dst_row * row_bytes, static_cast<size_t>(dst_rows * row_bytes),
               static_cast<const char*>(src) + src_row * row_bytes, static_cast<size_t>(src_rows * row_bytes),
               static_cast<size_t>(rows * row_bytes), batches, stream);
}

}  // namespace tpgemm::ops
