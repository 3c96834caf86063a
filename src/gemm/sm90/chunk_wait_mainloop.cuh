// The fused AllGather+GEMM's mainloop (NOTE [chunk wait] in kernels.h): CUTLASS's TMA + wgmma
// warp-specialized collective, whose load warp waits for A's columns piece by piece. The
// collective's own load() is reused as is: it is called once per piece, for that piece's k-tiles,
// after lane 0 of the load warp has waited (bounded by the plan's timeout, comm::wait_geq) until
// every row of the tile has that piece in place. The consumer warps are untouched: they wait on
// the shared-memory pipeline, as in any CUTLASS kernel.
// Included only by src/gemm/sm90/gather_*.cu.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>

#include "comm/device/sync.cuh"
#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {

template <class Base>
struct ChunkWaitMainloop : Base {
  static constexpr int kTileM = cute::size<0>(typename Base::TileShape{});
  static_assert(cute::size<2>(typename Base::TileShape{}) == kChunkWaitTileK, "pieces are whole k-tiles");

  struct Arguments : Base::Arguments {
    ChunkWait wait{};
  };
  struct Params : Base::Params {
    ChunkWait wait{};
    int64_t k_tiles = 1;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem, Arguments const& args, void* workspace) {
    Params p{Base::to_underlying_arguments(problem, args, workspace)};
    p.wait = args.wait;
    p.k_tiles = chunk_wait_k_tiles(cute::get<2>(problem));
    return p;
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState state, cute::tuple<TensorA, TensorB> const& inputs,
                           BlockCoord const& blk, KTileIterator k_iter, int k_count, int thread_idx,
                           uint32_t block_rank_in_cluster, typename Base::TensorStorage& smem) {
    const ChunkWait& c = params.wait;
    const int64_t row0 = static_cast<int64_t>(cute::get<0>(blk)) * kTileM;
    while (k_count > 0) {
      const int64_t kt = *k_iter;
      const int j = gather_k_piece_of_tile(kt, params.k_tiles, c.pieces);
      const int n = static_cast<int>(cute::min(static_cast<int64_t>(k_count),
                                               gather_k_piece_begin(j + 1, params.k_tiles, c.pieces) - kt));
      if (c.flag != nullptr) {
        if (threadIdx.x % 32 == 0) wait_for_piece(c, row0, j);
        __syncwarp();
        // The columns were written by a copy engine and seen through a generic-proxy load; the
        // warp's next reads of them are TMA (async-proxy) loads.
        asm volatile("fence.proxy.async.global;" ::: "memory");
      }
      Base::load(params, pipeline, state, inputs, blk, k_iter, n, thread_idx, block_rank_in_cluster, smem);
      state.advance(n);
      for (int i = 0; i < n; ++i) ++k_iter;
      k_count -= n;
    }
  }

 private:
  // Every part of the tile's rows [row0, row0 + kTileM) that a peer owns has piece j in place.
  // Not inlined: the load warp runs on few registers (the consumers take the rest).
  __device__ __noinline__ static void wait_for_piece(const ChunkWait& c, int64_t row0, int j) {
    const int64_t m = c.rows_per_rank * c.world, row1 = row0 + kTileM < m ? row0 + kTileM : m;
    for (int64_t row = row0; row < row1;) {
      const GatherPart p = gather_part(row, row1, c);
      if (p.stage > 0)
        comm::wait_geq(c.flag + (p.stage - 1) * c.flag_stride, c.seq[j], c.env, p.src, comm::WaitSite::kGatherPiece, j);
      row = p.end;
    }
  }
};

}  // namespace tpgemm::gemm::sm90
