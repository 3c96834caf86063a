// Cooperative 256x192x64, cluster 2x1 (the pair shares its B tile), persistent: the tile of
// coop_256x192_c1x2 with the other operand multicast, for grids of fewer tile rows than columns.
// Only the measured choice picks it (not in the rule).
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<256, 192, 64, 2, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kCoop256x192C2x1;
const KernelTable kCoop256x192C2x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
