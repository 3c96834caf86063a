// The tile scheduler of the fused AllGather+GEMM (NOTE [chunk wait] in kernels.h): CUTLASS's
// persistent scheduler, with tile row m served as (m + first tile starting in this rank's rows)
// mod tiles, so that each rank starts on its own rows (in place at launch) and meets its peers'
// blocks in the order they arrive (the kernel rasters along N: a wave covers a few rows of
// tiles). The change is made where every warp of the kernel gets its tiles, so the producer, the
// consumers and the epilogue all agree on them. The waiting is the mainloop's
// (chunk_wait_mainloop.cuh). Included only by src/gemm/sm90/gather_*.cu.
#pragma once

#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {

struct RotatingScheduler {};  // the tag a Config names; the selector below maps it to the class

template <int TileM>
class RotatingTileScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using WorkTileInfo = typename Base::WorkTileInfo;
  struct Arguments : Base::Arguments {
    ChunkWait wait{};  // its rank and block size place the rotation
  };
  struct Params : Base::Params {
    // Tile rows covering M, padded to whole clusters. CUTLASS pads further, to whole swizzle
    // groups: those extra tile rows lie past M (no-ops, all loads and stores out of bounds) and
    // are left where they are, so the rotation stays a permutation of the real tiles.
    int32_t m_tiles = 1;
    int32_t m_rotate = 0;  // chunk_wait_first_tile_row (NOTE [chunk wait])
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
    p.m_tiles = static_cast<int32_t>((m + TileM * cm - 1) / (TileM * cm) * cm);
    p.m_rotate = args.wait.flag == nullptr ? 0 : static_cast<int32_t>(chunk_wait_first_tile_row(args.wait, TileM, p.m_tiles));
    return p;
  }

  CUTLASS_DEVICE explicit RotatingTileScheduler(Params const& p) : Base(p), m_tiles_(p.m_tiles), m_rotate_(p.m_rotate) {}

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return rotate(Base::get_current_work());
  }
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w) {
    Base::advance_to_next_work();  // a persistent tile is never continued (no split-K here)
    return cute::make_tuple(rotate(Base::get_current_work()), true);
  }
  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w, Pipeline&, PipelineState) {
    return fetch_next_work(w);
  }

 private:
  CUTLASS_DEVICE WorkTileInfo rotate(WorkTileInfo w) const {
    if (w.is_valid()) w.M_idx = static_cast<int32_t>(chunk_wait_tile_row(w.M_idx, m_rotate_, m_tiles_));
    return w;
  }

  int32_t m_tiles_;
  int32_t m_rotate_;
};

}  // namespace tpgemm::gemm::sm90

namespace cutlass::gemm::kernel::detail {

template <class ArchTag, class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<tpgemm::gemm::sm90::RotatingScheduler, ArchTag, TileShape, ClusterShape, Stages> {
  using Scheduler = tpgemm::gemm::sm90::RotatingTileScheduler<cute::size<0>(TileShape{})>;
};

}  // namespace cutlass::gemm::kernel::detail
