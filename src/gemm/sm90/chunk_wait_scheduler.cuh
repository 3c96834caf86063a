// The tile scheduler of the fused AllGather+GEMM (NOTE [chunk wait] in kernels.h): CUTLASS's
// persistent scheduler, with two changes made where every warp of the kernel gets its tiles, so
// the producer, the consumers and the epilogue all agree on them:
//   - rotation: tile row m is served as (m + first tile starting in this rank's rows) mod tiles,
//     so each rank starts on its own rows (in place at launch) and meets its peers' blocks in
//     the order they arrive (the kernel rasters along N: a wave covers a few rows of tiles);
//   - waiting: before the load warp starts a tile, it waits until every row of A the tile reads
//     has arrived (a flag per part of the tile in a peer's block), bounded by the plan's timeout (comm::wait_geq). Only that warp waits: the
//     consumer warps wait on its shared-memory pipeline, as in any CUTLASS kernel.
// Included only by src/gemm/sm90/gather_*.cu.
#pragma once

#include <cutlass/gemm/kernel/tile_scheduler.hpp>

#include "comm/device/sync.cuh"
#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {

struct ChunkWaitScheduler {};  // the tag a Config names; the selector below maps it to the class

template <int TileM>
class ChunkWaitTileScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using WorkTileInfo = typename Base::WorkTileInfo;
  struct Arguments : Base::Arguments {
    ChunkWait wait{};
  };
  struct Params : Base::Params {
    ChunkWait wait{};
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
    p.wait = args.wait;
    const int64_t m = cute::get<0>(problem);
    const int64_t cm = cute::size<0>(cluster);
    p.m_tiles = static_cast<int32_t>((m + TileM * cm - 1) / (TileM * cm) * cm);
    p.m_rotate = static_cast<int32_t>(chunk_wait_first_tile_row(args.wait, TileM, p.m_tiles));
    return p;
  }

  // `p` is the kernel's parameter (grid constant): kept by address, not copied into registers.
  CUTLASS_DEVICE explicit ChunkWaitTileScheduler(Params const& p) : Base(p), params_(&p) {}

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return arrive(Base::get_current_work());
  }
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w) {
    Base::advance_to_next_work();  // a persistent tile is never continued (no split-K here)
    return cute::make_tuple(arrive(Base::get_current_work()), true);
  }
  template <class Pipeline, class PipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo w, Pipeline&, PipelineState) {
    return fetch_next_work(w);
  }

 private:
  CUTLASS_DEVICE WorkTileInfo arrive(WorkTileInfo w) const {
    if (!w.is_valid()) return w;
    w.M_idx = static_cast<int32_t>(chunk_wait_tile_row(w.M_idx, params_->m_rotate, params_->m_tiles));
    // Warp 0 is the cooperative kernel's mainloop load warp (ProducerWarpRole::Mainloop).
    if (params_->wait.flag != nullptr && threadIdx.x < 32) {
      if (threadIdx.x == 0) wait_for_rows(static_cast<int64_t>(w.M_idx) * TileM);
      __syncwarp();
      // The rows were written by a copy engine and seen through a generic-proxy load; the
      // warp's next reads of them are TMA (async-proxy) loads.
      asm volatile("fence.proxy.async.global;" ::: "memory");
    }
    return w;
  }

  CUTLASS_DEVICE void wait_for_rows(int64_t row0) const {
    const ChunkWait& c = params_->wait;
    const int64_t m = c.rows_per_rank * c.world, row1 = row0 + TileM < m ? row0 + TileM : m;
    for (int64_t row = row0; row < row1;) {
      const GatherPart p = gather_part(row, row1, c);
      if (p.stage > 0)
        comm::wait_geq(c.flag + (p.stage - 1) * c.flag_stride, c.seq[p.piece], c.env, p.src,
                       comm::WaitSite::kGatherPiece, p.piece);
      row = p.end;
    }
  }

  Params const* params_;
};

}  // namespace tpgemm::gemm::sm90

namespace cutlass::gemm::kernel::detail {

template <class ArchTag, class TileShape, class ClusterShape, uint32_t Stages>
struct TileSchedulerSelector<tpgemm::gemm::sm90::ChunkWaitScheduler, ArchTag, TileShape, ClusterShape, Stages> {
  using Scheduler = tpgemm::gemm::sm90::ChunkWaitTileScheduler<cute::size<0>(TileShape{})>;
};

}  // namespace cutlass::gemm::kernel::detail
