// The tile scheduler of the fused kernels (NOTE [tile order] in kernels.h): CUTLASS's persistent
// scheduler, with the s-th tile row it serves being ordered_tile_row(s): rotated so that the fused
// AllGather+GEMM starts each rank on its own rows and meets its peers' blocks in the order they
// arrive, or interleaved so that the fused GEMM+ReduceScatter finishes every owner's rows at the
// same pace. The kernels raster along N: a wave covers a few rows of tiles. The change is made
// where every warp of the kernel gets its tiles, so the producer, the consumers and the epilogue
// all agree on them. Included only by src/gemm/sm90/{gather,signal}_*.cu.
#pragma once

#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {

struct OrderedScheduler {};  // the tag a Config names; the selector below maps it to the class

template <int TileM>
class OrderedTileScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using WorkTileInfo = typename Base::WorkTileInfo;
  struct Arguments : Base::Arguments {
    TileRowOrder order{};
  };
  struct Params : Base::Params {
    // Tile rows covering M, padded to whole clusters. CUTLASS pads further, to whole swizzle
    // groups: those extra tile rows lie past M (no-ops, all loads and stores out of bounds) and
    // are left where they are, so the rotation stays a permutation of the real tiles.
    TileRowPermutation perm{};
  };

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem, TileShape tile, ClusterShape cluster,
                                        cutlass::KernelHardwareInfo const& hw, Arguments const& args,
                                        void* workspace = nullptr, uint32_t epilogue_subtile = 1,
                                        uint32_t ktile_start_alignment_count = 1u) {
    Params p;
    static_cast<Base::Params&>(p) = Base::to_underlying_arguments(problem, tile, cluster, hw, args, workspace,
                                                                  epilogue_subtile, ktile_start_alignment_count);
    const int64_t m = cute::get<0>(problem);
    const int64_t cm = cute::size<0>(cluster);
    p.perm = TileRowPermutation::make(args.order, TileM, (m + TileM * cm - 1) / (TileM * cm) * cm);
    return p;
  }

  CUTLASS_DEVICE explicit OrderedTileScheduler(Params const& p) : Base(p), perm_(p.perm) {}

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return reorder(Base::get_current_work());
  }
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w) {
    Base::advance_to_next_work();  // a persistent tile is never continued (no split-K here)
    return cute::make_tuple(reorder(Base::get_current_work()), true);
  }
  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w, Pipeline&, PipelineState) {
    return fetch_next_work(w);
  }

 private:
  CUTLASS_DEVICE WorkTileInfo reorder(WorkTileInfo w) const {
    if (w.is_valid()) w.M_idx = perm_(w.M_idx);
    return w;
  }

  TileRowPermutation perm_;
};

}  // namespace tpgemm::gemm::sm90

namespace cutlass::gemm::kernel::detail {

template <class ArchTag, class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<tpgemm::gemm::sm90::OrderedScheduler, ArchTag, TileShape, ClusterShape, Stages> {
  using Scheduler = tpgemm::gemm::sm90::OrderedTileScheduler<cute::size<0>(TileShape{})>;
};

}  // namespace cutlass::gemm::kernel::detail
