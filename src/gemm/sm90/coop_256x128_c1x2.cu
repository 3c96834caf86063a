// Cooperative 256x128x64, cluster 1x2, persistent: the transpose of coop_128x256_c2x1 (the pair
// shares its A tile); another tile grid, so another wave count, for the same work per tile.
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<256, 128, 64, 1, 2, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kCoop256x128C1x2;
const KernelTable kCoop256x128C1x2 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
