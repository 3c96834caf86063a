// Cooperative 128x256x64, cluster 2x1, persistent: both consumer warp groups work on one 128x256
// tile (64 rows each) and the CTA pair shares (multicasts) its B tile. The large-shape workhorse.
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 256, 64, 2, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kCoop128x256C2x1;
const KernelTable kCoop128x256C2x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
