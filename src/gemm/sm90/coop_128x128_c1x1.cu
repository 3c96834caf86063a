// Cooperative 128x128x64, no cluster, persistent: the smallest tile of the core, for grids that a
// 128x256 tile quantizes badly into waves (small M x N) and for shapes where a cluster's pair of
// CTAs waits on its slower member. Only the measured choice picks it (not in the rule).
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 128, 64, 1, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kCoop128x128C1x1;
const KernelTable kCoop128x128C1x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
