// The fused GEMM+ReduceScatter's epilogue (NOTE [tile signal] in kernels.h): CUTLASS's TMA
// warp-specialized epilogue, reused as is, plus, after its store() of each tile: the warp that
// issued the tile's TMA stores waits for them (not just for their reads of shared memory), then
// one of its threads raises the tile's flag to the call's sequence number. The other consumer
// warps go on to the next tile (a barrier of all of them cost more), and the sequence number is
// read once per kernel: both waits sat between one tile's epilogue and the next tile's
// mainloop, a few percent of a small-K GEMM (docs/perf.md). The flag lets the tile travel to its
// owner while the GEMM goes on. Included only by src/gemm/sm90/signal_*.cu.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>

#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {

template <class Base>
struct TileSignalEpilogue : Base {
  struct Arguments : Base::Arguments {
    TileSignal signal{};
  };
  struct Params : Base::Params {
    TileSignal signal{};
  };

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const& problem, Arguments const& args, void* workspace) {
    Params p{Base::to_underlying_arguments(problem, args, workspace)};
    p.signal = args.signal;
    return p;
  }

  CUTLASS_HOST_DEVICE TileSignalEpilogue(Params const& params, typename Base::TensorStorage& smem)
      : Base(params, smem), signal_(&params.signal) {}

  template <class LoadPipeline, class LoadState, class StorePipeline, class StoreState, class ProblemShapeMNKL,
            class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout, class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadState load_state, StorePipeline store_pipeline,
                            StoreState store_state, ProblemShapeMNKL problem, TileShapeMNK tile,
                            TileCoordMNKL coord, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, typename Base::TensorStorage& smem,
                            int subtile_idx = -1) {
    // One inlined copy of CUTLASS's store (a second, for a null `flags`, measured slower).
    auto next = Base::store(load_pipeline, load_state, store_pipeline, store_state, problem, tile, coord, accumulators,
                            tiled_mma, thread_idx, smem, subtile_idx);
    const TileSignal& s = *signal_;
    // CUTLASS's epilogue issues every TMA store from the first consumer warp (`issue_tma_store`);
    // the other warps have no bulk groups to wait for. Not the ".read" form CUTLASS uses: the
    // writes themselves must be done.
    if (s.flags != nullptr && thread_idx < cutlass::NumThreadsPerWarp) {
      asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
      asm volatile("fence.proxy.async.global;" ::: "memory");  // async-proxy writes, then a generic release
      __syncwarp();
      const int64_t m = cute::get<0>(coord), n = cute::get<1>(coord), l = cute::get<3>(coord);
      if (thread_idx == 0 && m < s.m_tiles && n < s.n_tiles) {  // CUTLASS's padding tiles past M or N store nothing
        // Set before the kernel (launch_begin_call) and fixed while it runs.
        if (seq_ == 0) seq_ = *reinterpret_cast<const volatile uint64_t*>(s.seq);
        uint64_t* flag = s.flags + (l * s.m_tiles + m) * s.n_tiles + n;
        asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(seq_) : "memory");
      }
    }
    return next;
  }

 private:
  const TileSignal* signal_;
  uint64_t seq_ = 0;  // the call's sequence number (never 0), once read
};

}  // namespace tpgemm::gemm::sm90
