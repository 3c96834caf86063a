// The fused GEMM+ReduceScatter's epilogue (NOTE [tile signal] in kernels.h): CUTLASS's TMA
// warp-specialized epilogue, reused as is, plus, after its store() of each tile: the stores are
// waited for (not just their reads of shared memory), then one thread raises the tile's flag to
// the call's sequence number. The wait costs each tile the time of its last TMA store (the next
// tile's loads keep running meanwhile; 4096 x 8192 x 2048: 0.217 ms against 0.196 without); the
// flag lets the tile travel to its owner while the GEMM goes on. Included only by
// src/gemm/sm90/signal_*.cu.
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
    const TileSignal& s = *signal_;
    if (s.flags == nullptr)
      return Base::store(load_pipeline, load_state, store_pipeline, store_state, problem, tile, coord, accumulators,
                         tiled_mma, thread_idx, smem, subtile_idx);
    constexpr int kThreads = cute::size(TiledMma{});  // the consumer threads, as CUTLASS's epilogue counts them
    auto next = Base::store(load_pipeline, load_state, store_pipeline, store_state, problem, tile, coord, accumulators,
                            tiled_mma, thread_idx, smem, subtile_idx);
    // Only the warp that issued the TMA stores has bulk groups to wait for; in the others this
    // returns at once. Not the ".read" form CUTLASS uses: the writes themselves must be done.
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");  // async-proxy writes, then a generic release
    // The first user barrier (hardware id 8: the unsigned overload adds CUTLASS's 8 reserved ones).
    cutlass::arch::NamedBarrier::sync(kThreads, 0u);
    if (thread_idx == 0) {
      const int64_t m = cute::get<0>(coord), n = cute::get<1>(coord), l = cute::get<3>(coord);
      if (m < s.m_tiles && n < s.n_tiles) {  // CUTLASS's padding tiles past M or N store nothing
        const uint64_t seq = *reinterpret_cast<const volatile uint64_t*>(s.seq);
        uint64_t* flag = s.flags + (l * s.m_tiles + m) * s.n_tiles + n;
        asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(seq) : "memory");
      }
    }
    return next;
  }

 private:
  const TileSignal* signal_;
};

}  // namespace tpgemm::gemm::sm90
