#include "core/check.h"
#include "ops/pipelined/scale_pieces.h"

namespace tpgemm::ops {
namespace {

__global__ void copy_scale_pieces_kernel(float* dst, const float* src, int64_t src_rows, int64_t k_blocks,
                                         const ScalePiece* pieces) {
  const ScalePiece p = pieces[blockIdx.x];
  for (int64_t e = threadIdx.x; e < k_blocks * p.rows; e += blockDim.x) {
    const int64_t kb = e / p.rows, i = e - kb * p.rows;
    dst[p.at + e] = src[kb * src_rows + p.row0 + i];
  }
}

}  // namespace

void launch_copy_scale_pieces(float* dst, const float* src, int64_t src_rows, int64_t k_blocks,
                              const ScalePiece* pieces, int count, cudaStream_t stream) {
  if (count == 0) return;
  copy_scale_pieces_kernel<<<count, 256, 0, stream>>>(dst, src, src_rows, k_blocks, pieces);
  TPGEMM_CHECK_LAUNCH();
}

}  // namespace tpgemm::ops
