// One Hopper GEMM kernel from CUTLASS 3.x collective builders: TMA loads, wgmma, warp-specialized
// persistent mainloop, TMA epilogue D = alpha * acc + beta * C (fp32 accumulate and compute).
// Included only by the src/gemm/sm90/<config>.cu files, each of which instantiates one Config.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/epilogue/fusion/operations.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>
#include <cutlass/kernel_hardware_info.h>

#include "core/check.h"
#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {

template <class Collective>
using AsBuilt = Collective;

// Tile (M, N, K), cluster (M, N), mainloop and epilogue schedules, tile scheduler, and what
// becomes of the collective mainloop and epilogue the builders make (by default, themselves).
template <int TM, int TN, int TK, int CM, int CN, class MainloopSchedule, class EpilogueSchedule, class TileScheduler_,
          template <class> class MainloopWrapper = AsBuilt, template <class> class EpilogueWrapper = AsBuilt>
struct Config {
  using Tile = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using Cluster = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  using Mainloop = MainloopSchedule;
  using Epilogue = EpilogueSchedule;
  using TileScheduler = TileScheduler_;
  template <class Collective>
  using WrapMainloop = MainloopWrapper<Collective>;
  template <class Collective>
  using WrapEpilogue = EpilogueWrapper<Collective>;
};

// T: cutlass::bfloat16_t or cutlass::half_t. LayoutB: ColumnMajor is tpgemm's kNK ([N, K]
// row-major, K contiguous), RowMajor its kKN ([K, N] row-major, N contiguous).
template <class Cfg, class T, class LayoutB>
struct Kernel {
  using Row = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(T);  // TMA moves 16-byte aligned rows
  using Fusion = cutlass::epilogue::fusion::LinearCombination<T, float, T, float>;
  using CollectiveEpilogue = typename Cfg::template WrapEpilogue<typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, typename Cfg::Tile, typename Cfg::Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, T, Row, kAlign, T, Row, kAlign,
      typename Cfg::Epilogue, Fusion>::CollectiveOp>;
  using CollectiveMainloop = typename Cfg::template WrapMainloop<typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, Row, kAlign, T, LayoutB, kAlign, float,
      typename Cfg::Tile, typename Cfg::Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      typename Cfg::Mainloop>::CollectiveOp>;
  using GemmKernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, CollectiveMainloop,
                                                          CollectiveEpilogue, typename Cfg::TileScheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;
  static constexpr bool kBColumnMajor = std::is_same_v<LayoutB, cutlass::layout::ColumnMajor>;

  static typename Gemm::Arguments arguments(const Args& x) {
    using namespace cute;
    typename GemmKernel::StrideA sa = make_stride(x.lda, _1{}, x.stride_a);
    typename GemmKernel::StrideB sb;
    if constexpr (kBColumnMajor) sb = make_stride(x.ldb, _1{}, x.stride_b);
    else sb = make_stride(_1{}, x.ldb, x.stride_b);
    typename GemmKernel::StrideC sc = make_stride(x.ldc, _1{}, x.stride_c);
    typename GemmKernel::StrideD sd = make_stride(x.ldd, _1{}, x.stride_d);
    typename Gemm::Arguments args{
        x.l > 1 ? cutlass::gemm::GemmUniversalMode::kBatched : cutlass::gemm::GemmUniversalMode::kGemm,
        {x.m, x.n, x.k, x.l},
        {static_cast<const T*>(x.a), sa, static_cast<const T*>(x.b), sb},
        {}};
    // By name: a wrapped epilogue's arguments (a derived struct) take no positional list.
    args.epilogue.ptr_C = static_cast<const T*>(x.c);
    args.epilogue.dC = sc;
    args.epilogue.ptr_D = static_cast<T*>(x.d);
    args.epilogue.dD = sd;
    args.epilogue.thread.alpha = x.alpha;
    args.epilogue.thread.beta = x.beta;
    args.hw_info.device_id = x.device;
    args.hw_info.sm_count = x.sm_count;
    args.hw_info.max_active_clusters = x.max_active_clusters;
    args.scheduler.max_swizzle_size = x.swizzle;
    using Raster = cutlass::gemm::kernel::detail::RasterOrderOptions;
    args.scheduler.raster_order = x.raster == 1 ? Raster::AlongM : x.raster == 2 ? Raster::AlongN : Raster::Heuristic;
    if constexpr (requires { args.scheduler.order; }) args.scheduler.order = x.order;  // NOTE [tile order]
    if constexpr (requires { args.mainloop.wait; }) {  // NOTE [chunk wait], NOTE [own rows in place]
      args.mainloop.wait = x.wait;
      args.mainloop.own_a = x.own_a;
    }
    if constexpr (requires { args.epilogue.signal; }) args.epilogue.signal = x.signal;  // NOTE [tile signal]
    if constexpr (requires { args.scheduler.decomposition_mode; }) {
      // Stream-K whenever the last wave is partial (CUTLASS's own heuristic keeps data-parallel
      // tiles when that wave is more than half full, e.g. 224 tiles on 132 SMs: tpgemm's rule
      // picks this configuration precisely for such shapes). Its partial sums are reduced in
      // a fixed order (ReductionMode::Deterministic, the default): D is reproducible.
      args.scheduler.decomposition_mode = cutlass::gemm::kernel::detail::DecompositionMode::StreamK;
    }
    return args;
  }

  static bool implementable(const Args& x) { return Gemm::can_implement(arguments(x)) == cutlass::Status::kSuccess; }
  static size_t workspace_bytes(const Args& x) { return Gemm::get_workspace_size(arguments(x)); }

  static int prepare() {
    // The mainloop's stages fill most of the 227 KiB of shared memory: above the default 48.
    TPGEMM_CUDA_CHECK(cudaFuncSetAttribute(cutlass::device_kernel<GemmKernel>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, GemmKernel::SharedStorageSize));
    return cutlass::KernelHardwareInfo::query_device_max_active_clusters<GemmKernel>();
  }

  static void run(const Args& x, void* workspace, cudaStream_t stream) {
    const typename Gemm::Arguments args = arguments(x);
    // Stream-K zeroes its reduction flags here (an async memset on `stream`); others do nothing.
    cutlass::Status st = GemmKernel::initialize_workspace(args, workspace, stream);
    if (st == cutlass::Status::kSuccess) {
      typename GemmKernel::Params params = GemmKernel::to_underlying_arguments(args, workspace);
      st = Gemm::run(params, stream);
    }
    if (st != cutlass::Status::kSuccess)
      throw Error(ErrorCode::kCudaError, strfmt("CUTLASS sm90 GEMM %dx%dx%d L=%d: %s (%s)", x.m, x.n, x.k, x.l,
                                                cutlassGetStatusString(st), cudaGetErrorString(cudaGetLastError())));
  }

  static constexpr KernelFns fns() { return {&implementable, &workspace_bytes, &prepare, &run}; }
};

// The table of one configuration: [dtype][layout] as in kernels.h.
template <class Cfg>
constexpr KernelTable table_all_layouts() {
  using Col = cutlass::layout::ColumnMajor;
  using Row = cutlass::layout::RowMajor;
  return {{{Kernel<Cfg, cutlass::bfloat16_t, Row>::fns(), Kernel<Cfg, cutlass::bfloat16_t, Col>::fns()},
           {Kernel<Cfg, cutlass::half_t, Row>::fns(), Kernel<Cfg, cutlass::half_t, Col>::fns()}}};
}

}  // namespace tpgemm::gemm::sm90
