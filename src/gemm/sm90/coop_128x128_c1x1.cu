// Cooperative 128x128x64, no cluster, persistent: half the tile of coop_128x256_c2x1, for grids
// that tile quantizes badly into waves (768 x 13936: 330 tiles of 128x256 fill 2.5 waves of 132
// SMs, 654 of 128x128 4.95). Only the measured choice picks it (not in the rule).
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 128, 64, 1, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::PersistentScheduler>;
extern const KernelTable kCoop128x128C1x1;
const KernelTable kCoop128x128C1x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
