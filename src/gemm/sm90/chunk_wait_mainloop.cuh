// The fused AllGather+GEMM's mainloop (NOTE [chunk wait] in kernels.h): CUTLASS's TMA + wgmma
// warp-specialized collective, whose load warp waits for A's columns piece by piece. The
// collective's own load() is reused as is: it is called once per piece, for that piece's k-tiles,
// after lane 0 of the load warp has waited (bounded by the plan's timeout, comm::wait_geq) until
// every row of the tile has that piece in place. The consumer warps are untouched: they wait on
// the shared-memory pipeline, as in any CUTLASS kernel. With own_in_place (NOTE [own rows in
// place]), the tiles of this rank's own block are loaded by the same load() from the caller's A:
// it is handed a second set of the collective's Params, whose A descriptor covers only that block,
// the TMA coordinate tensors made from them (the collective's load_init, on the block's shape),
// and the tile's row coordinate within the block.
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
  static_assert(kTileM == kChunkWaitTileM, "the own block is whole tile rows");
  static_assert(cute::size<2>(typename Base::TileShape{}) == kChunkWaitTileK, "pieces are whole k-tiles");

  struct Arguments : Base::Arguments {
    ChunkWait wait{};
    const void* own_a = nullptr;  // with wait.own_in_place: [L, rows_per_rank, K], rows as A's
  };
  struct Params : Base::Params {
    ChunkWait wait{};
    int64_t k_tiles = 1;
    // With wait.own_in_place: the Params of the own block alone (its A descriptor is what they
    // are for; they live in the kernel's parameters, where TMA reads descriptors from), and the
    // block's problem shape (rows_per_rank, N, K, L).
    typename Base::Params own{};
    cute::Shape<int, int, int, int> own_problem{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem, Arguments const& args, void* workspace) {
    Params p{Base::to_underlying_arguments(problem, args, workspace)};
    p.wait = args.wait;
    p.k_tiles = chunk_wait_k_tiles(cute::get<2>(problem));
    if (args.wait.own_in_place) {
      const auto mnkl = cute::append<4>(problem, 1);
      p.own_problem = cute::make_shape(static_cast<int>(args.wait.rows_per_rank), static_cast<int>(cute::get<1>(mnkl)),
                                       static_cast<int>(cute::get<2>(mnkl)), static_cast<int>(cute::get<3>(mnkl)));
      typename Base::Arguments own = args;
      own.ptr_A = static_cast<decltype(own.ptr_A)>(args.own_a);
      cute::get<2>(own.dA) = args.wait.rows_per_rank * cute::get<0>(args.dA);  // packed: one block per batch entry
      p.own = Base::to_underlying_arguments(p.own_problem, own, workspace);
    }
    return p;
  }

  CUTLASS_DEVICE static void prefetch_tma_descriptors(Params const& params) {
    Base::prefetch_tma_descriptors(params);
    if (params.wait.own_in_place) cute::prefetch_tma_descriptor(params.own.tma_load_a.get_tma_descriptor());
  }

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, typename Base::MainloopPipeline pipeline,
                           typename Base::PipelineState state, cute::tuple<TensorA, TensorB> const& inputs,
                           BlockCoord const& blk, KTileIterator k_iter, int k_count, int thread_idx,
                           uint32_t block_rank_in_cluster, typename Base::TensorStorage& smem) {
    const ChunkWait& c = params.wait;
    const int64_t row0 = static_cast<int64_t>(cute::get<0>(blk)) * kTileM;
    // The tile's row within the own block when it is read in place, else -1.
    const int64_t own_row0 = c.rank * c.rows_per_rank;
    const int64_t own_tile = c.own_in_place && row0 >= own_row0 && row0 < own_row0 + c.rows_per_rank
                                 ? (row0 - own_row0) / kTileM : -1;
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
      if (own_tile >= 0) {
        const auto own_blk = cute::make_tuple(static_cast<int>(own_tile), cute::get<1>(blk), cute::get<2>(blk),
                                              cute::get<3>(blk));
        Base::load(params.own, pipeline, state, this->load_init(params.own_problem, params.own), own_blk, k_iter, n,
                   thread_idx, block_rank_in_cluster, smem);
      } else {
        Base::load(params, pipeline, state, inputs, blk, k_iter, n, thread_idx, block_rank_in_cluster, smem);
      }
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
