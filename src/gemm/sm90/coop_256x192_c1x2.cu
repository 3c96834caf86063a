// Cooperative 256x192x64, cluster 1x2 (the pair shares its A tile), persistent: each warp group
// multiplies 128x192, more operand reuse per tile than 256x128, and another tile grid: large
// matmuls whose 128x256 grid ends in a thin last wave, and few rows against a wide N (the tiles
// cuBLASLt's fastest kernels use are 192 wide). Only the measured choice picks it (not in the rule).
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<256, 192, 64, 1, 2, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kCoop256x192C1x2;
const KernelTable kCoop256x192C1x2 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
