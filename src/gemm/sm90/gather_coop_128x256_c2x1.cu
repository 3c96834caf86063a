// The fused AllGather+GEMM's kernel: the cooperative 128x256x64 cluster-2x1 configuration
// (coop_128x256_c2x1.cu) with the ordered tile scheduler (rotated) and the chunk-waiting
// mainloop (NOTE [chunk wait]).
#include "gemm/sm90/chunk_wait_mainloop.cuh"
#include "gemm/sm90/kernel.cuh"
#include "gemm/sm90/ordered_scheduler.cuh"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 256, 64, 2, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, OrderedScheduler, ChunkWaitMainloop>;
extern const KernelTable kGatherCoop128x256C2x1;
const KernelTable kGatherCoop128x256C2x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
