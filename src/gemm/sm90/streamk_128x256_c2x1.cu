// Cooperative 128x256x64, cluster 2x1, stream-K: the last, partial wave of tiles is split along K
// over all SMs (partial sums in the workspace, reduced in a fixed order: deterministic). For
// shapes whose tile count fills the SMs badly (e.g. 2048x3584: 224 tiles on 132 SMs).
#include "gemm/sm90/kernel.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 256, 64, 2, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, cutlass::gemm::StreamKScheduler>;
extern const KernelTable kStreamK128x256C2x1;
const KernelTable kStreamK128x256C2x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
