// The fused GEMM+ReduceScatter's kernel: the cooperative 128x256x64 cluster-2x1 configuration
// (coop_128x256_c2x1.cu) with the ordered tile scheduler (interleaved, NOTE [tile order]) and the
// tile-signalling epilogue (NOTE [tile signal]).
#include "gemm/sm90/kernel.cuh"
#include "gemm/sm90/ordered_scheduler.cuh"
#include "gemm/sm90/tile_signal_epilogue.cuh"
#include "ops/gemm_rs/tile_reduce.h"

namespace tpgemm::gemm::sm90 {

using Cfg = Config<128, 256, 64, 2, 1, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                   cutlass::epilogue::TmaWarpSpecializedCooperative, OrderedScheduler, AsBuilt, TileSignalEpilogue>;
static_assert(ops::kTileReduceM == 128 && ops::kTileReduceN == 256, "the tile flags index this kernel's tiles");
extern const KernelTable kSignalCoop128x256C2x1;
const KernelTable kSignalCoop128x256C2x1 = table_all_layouts<Cfg>();

}  // namespace tpgemm::gemm::sm90
