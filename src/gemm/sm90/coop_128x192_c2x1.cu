// Cooperative 128x192x64, cluster 2x1, persistent: a tile grid between 128x128 and 128x256, for
// N that quantizes into waves of 192 columns where 256 leaves a thin last wave, and mid-sized
// matmuls of a short K. Only the measured choice picks it (not in the rule).
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 192, 64, 2, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kCoop128x192C2x1;
const KernelTable kCoop128x192C2x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
