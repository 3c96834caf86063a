// The fused GEMM+ReduceScatter's epilogue (NOTE [tile signal] in kernels.h): CUTLASS's TMA
// warp-specialized epilogue, reused as is, plus two things around its store() of each tile:
//   before the CTA's first store of the call: lane 0 waits (bounded) until every peer has
//     finished reading the buffer in the call before (the buffer is overwritten in place);
//   after each tile's store: the stores are waited for (not just their reads of shared memory),
//     then one thread raises the tile's flag to the call's sequence number.
// The wait for the stores costs each tile the time of its last TMA store (the next tile's loads
// keep running meanwhile); the flag lets the owner of those rows reduce them while the GEMM
// goes on. Included only by src/gemm/sm90/signal_*.cu.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/cutlass.h>

#include "comm/device/sync.cuh"
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
    if (seq_ == 0) {
      seq_ = *reinterpret_cast<const volatile uint64_t*>(s.seq);
      if (thread_idx == 0) wait_for_readers(s, seq_);
      sync<kThreads>();
    }
    auto next = Base::store(load_pipeline, load_state, store_pipeline, store_state, problem, tile, coord, accumulators,
                            tiled_mma, thread_idx, smem, subtile_idx);
    // Only the warp that issued the TMA stores has bulk groups to wait for; in the others this
    // returns at once. Not the ".read" form CUTLASS uses: the writes themselves must be done.
    if (s.mode != 3) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    asm volatile("fence.proxy.async.global;" ::: "memory");  // async-proxy writes, then generic release
    sync<kThreads>();
    if (thread_idx == 0) {
      const int64_t m = cute::get<0>(coord), n = cute::get<1>(coord), l = cute::get<3>(coord);
      if (m < s.m_tiles && n < s.n_tiles) {  // CUTLASS's padding tiles past M or N store nothing
        uint64_t* flag = s.flags + (l * s.m_tiles + m) * s.n_tiles + n;
        if (s.mode == 0) __threadfence_system();
        if (s.mode == 2) asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(flag), "l"(seq_) : "memory");
        else comm::st_release_sys(flag, seq_);
      }
    }
    return next;
  }

 private:
  template <int kThreads>
  CUTLASS_DEVICE static void sync() {
    cutlass::arch::NamedBarrier::sync(kThreads, static_cast<int>(cutlass::arch::ReservedNamedBarriers::FirstUserBarrier));
  }

  // Not inlined: cold, and the consumer warps are short of registers.
  __device__ __noinline__ static void wait_for_readers(const TileSignal& s, uint64_t seq) {
    for (int q = 0; q < s.world; ++q)
      if (q != s.rank && !comm::wait_geq(s.free + q, seq - 1, s.env, q, comm::WaitSite::kPartialFree, 0)) return;
  }

  const TileSignal* signal_;
  uint64_t seq_ = 0;  // this call's sequence number (>= 1), read at the CTA's first store
};

}  // namespace tpgemm::gemm::sm90
