// Copies of pieces of A's FP8 scales, each where one chunk matmul reads it (NOTE [gathered scales]).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace tpgemm::ops {

// Rows [row0, row0 + rows) of A, their scales to go to dst + at.
struct ScalePiece {
  int64_t row0 = 0, rows = 0, at = 0;
};

// For each of `count` pieces (a device array): its rows' scales out of `src`, `k_blocks` rows of
// `src_rows` values (A's block scales, K block by K block; row-wise scales: one such row), into
// dst + at as `k_blocks` rows of `rows` values. One launch for all.
void launch_copy_scale_pieces(float* dst, const float* src, int64_t src_rows, int64_t k_blocks,
                              const ScalePiece* pieces, int count, cudaStream_t stream);

}  // namespace tpgemm::ops
