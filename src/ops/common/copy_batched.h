// Copy-engine transfers of the same byte range out of every batch entry (the operands'
// outermost dimension), and of matrices whose rows and entries are strided.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/check.h"

namespace tpgemm::ops {

// `width` bytes from src + b * src_pitch to dst + b * dst_pitch, for b < batches (batch entries,
// or the rows of a matrix whose rows are a pitch apart).
// The largest pitch of a 2D or 3D copy (cudaDevAttrMaxPitch on the GPUs tpgemm runs on); beyond
// it, one copy per row or entry.
constexpr size_t kMaxCopyPitch = (size_t(1) << 31) - 1;

inline void copy_batched(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, int64_t batches,
                         cudaStream_t stream) {
  if (batches == 1)
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(dst, src, width, cudaMemcpyDeviceToDevice, stream));
  else if (dst_pitch > kMaxCopyPitch || src_pitch > kMaxCopyPitch)
    for (int64_t b = 0; b < batches; ++b)
      TPGEMM_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(dst) + static_cast<size_t>(b) * dst_pitch,
                                        static_cast<const char*>(src) + static_cast<size_t>(b) * src_pitch, width,
                                        cudaMemcpyDeviceToDevice, stream));
  else
    TPGEMM_CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, static_cast<size_t>(batches),
                                        cudaMemcpyDeviceToDevice, stream));
}

// `rows` rows of `row_bytes` bytes out of each of `batches` matrices: row r of entry b from
// src + b * src_batch + r * src_ld to dst + b * dst_batch + r * dst_ld (all in bytes). Entries of
// contiguous rows (on both sides) are one copy, or one 2D copy over the entries; one entry of
// strided rows a 2D copy; entries each side holds whole rows apart one 3D copy; else a 2D copy
// per entry.
inline void copy_matrices(void* dst, size_t dst_ld, size_t dst_batch, const void* src, size_t src_ld, size_t src_batch,
                          size_t row_bytes, int64_t rows, int64_t batches, cudaStream_t stream) {
  if (rows <= 0 || batches <= 0 || row_bytes == 0) return;
  if ((dst_ld == row_bytes && src_ld == row_bytes) || rows == 1) {  // (one entry: a plain copy)
    copy_batched(dst, dst_batch, src, src_batch, row_bytes * static_cast<size_t>(rows), batches, stream);
    return;
  }
  if (batches == 1) {
    copy_batched(dst, dst_ld, src, src_ld, row_bytes, rows, stream);
    return;
  }
  if (dst_batch % dst_ld == 0 && src_batch % src_ld == 0 && dst_ld <= kMaxCopyPitch && src_ld <= kMaxCopyPitch) {
    cudaMemcpy3DParms m{};
    m.srcPtr = make_cudaPitchedPtr(const_cast<void*>(src), src_ld, row_bytes, src_batch / src_ld);
    m.dstPtr = make_cudaPitchedPtr(dst, dst_ld, row_bytes, dst_batch / dst_ld);
    m.extent = make_cudaExtent(row_bytes, static_cast<size_t>(rows), static_cast<size_t>(batches));
    m.kind = cudaMemcpyDeviceToDevice;
    TPGEMM_CUDA_CHECK(cudaMemcpy3DAsync(&m, stream));
    return;
  }
  for (int64_t b = 0; b < batches; ++b)
    copy_batched(static_cast<char*>(dst) + static_cast<size_t>(b) * dst_batch, dst_ld,
                 static_cast<const char*>(src) + static_cast<size_t>(b) * src_batch, src_ld, row_bytes, rows, stream);
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
