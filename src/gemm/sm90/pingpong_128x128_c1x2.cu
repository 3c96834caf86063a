// Ping-pong 128x128x64, cluster 1x2, persistent: the two consumer warp groups take turns on
// their own tiles, so one's epilogue runs under the other's mainloop (short K), and the smaller
// tile quantizes better into waves.
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 128, 64, 1, 2, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                   cutlass::epilogue::TmaWarpSpecialized, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kPingpong128x128C1x2;
const KernelTable kPingpong128x128C1x2 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
