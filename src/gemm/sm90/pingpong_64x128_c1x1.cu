// Ping-pong 64x128x64, no cluster, persistent: each consumer warp group its own 64-row tile, for
// few rows (M of a few dozen wastes half of a 128-row tile) and grids too small to fill the SMs
// with larger tiles. Only the measured choice picks it (not in the rule).
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<64, 128, 64, 1, 1, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                   cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kPingpong64x128C1x1;
const KernelTable kPingpong64x128C1x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
