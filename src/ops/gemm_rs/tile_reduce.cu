// The fused GEMM+ReduceScatter's reduction kernel (NOTE [tile reduce] in tile_reduce.h).
#include "comm/device/sync.cuh"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "ops/allreduce/allreduce_device.cuh"  // kernel_instance
#include "ops/common/vec.cuh"
#include "ops/gemm_rs/tile_reduce.h"

namespace tpgemm::ops {
namespace {

constexpr int kThreads = 512;
// Vectors per thread in flight from each rank, as registers allow (W = 0: any other world size,
// one rank's vector at a time).
template <int kW>
constexpr int kUnrollFor = kW == 0 ? 1 : kW <= 4 ? 4 : 2;

__global__ void begin_call_kernel(uint64_t* control) { control[0] += 1; }

// The next of this call's tickets [first, end), or -1 once they are all handed out. A ticket
// is taken only by a compare-and-swap below `end`, so a block that finds none takes nothing
// from the next call.
__device__ int64_t take_ticket(unsigned long long* tickets, unsigned long long first, unsigned long long end) {
  unsigned long long cur = *reinterpret_cast<volatile unsigned long long*>(tickets);
  while (cur >= first && cur < end) {
    const unsigned long long seen = atomicCAS(tickets, cur, cur + 1);
    if (seen == cur) return static_cast<int64_t>(cur - first);
    cur = seen;
  }
  return -1;
}

__device__ __forceinline__ uint64_t* flags_of(const TileReduceArgs& a, int q) {
  return static_cast<uint64_t*>(a.signals[q]);
}

// This rank has read every peer's partial products of call `seq`: raise my slot of their free flags.
__device__ void finish_call(const TileReduceArgs& a, uint64_t seq) {
  __threadfence_system();
  const int64_t tiles = a.l * a.m_tiles * a.n_tiles;
  for (int q = 0; q < a.world; ++q)
    if (q != a.rank) comm::st_release_sys(flags_of(a, q) + tiles + a.rank, seq);
}

template <typename T, int kW>
__global__ void __launch_bounds__(kThreads) tile_reduce_kernel(TileReduceArgs a) {
  __shared__ int64_t unit;
  const int world = kW > 0 ? kW : a.world;
  const uint64_t seq = *reinterpret_cast<volatile uint64_t*>(a.control);
  const int64_t units = a.units;
  const int64_t rows_per_rank = a.m / world, tiles_per_rank = rows_per_rank / kTileReduceM;
  const int64_t nv = a.n / 8;  // 16-byte vectors per row
  for (;;) {
    if (threadIdx.x == 0)
      unit = take_ticket(reinterpret_cast<unsigned long long*>(a.control + 1), (seq - 1) * units, seq * units);
    __syncthreads();
    const int64_t u = unit;
    if (u < 0) return;
    const int64_t nt = u % a.n_tiles, j = u / a.n_tiles % tiles_per_rank, l = u / (a.n_tiles * tiles_per_rank);
    const int64_t tile = (l * a.m_tiles + a.rank * tiles_per_rank + j) * a.n_tiles + nt;
    bool ok = true;
    if (threadIdx.x < world)
      ok = comm::wait_geq(flags_of(a, threadIdx.x) + tile, seq, a.env, threadIdx.x, comm::WaitSite::kTileFlag,
                          static_cast<int>(tile));
    if (__syncthreads_or(!ok)) return;  // reported; the call fails on the host

    // Rows [row0, row0 + 128) of my block, vector columns [c0, c0 + tile_nv).
    const int64_t row0 = j * kTileReduceM, c0 = nt * (kTileReduceN / 8);
    const int64_t tile_nv = min(kTileReduceN / 8, nv - c0), count = kTileReduceM * tile_nv;
    const int64_t src0 = (l * a.m + a.rank * rows_per_rank + row0) * nv + c0;  // in every rank's partial
    const int64_t dst0 = (l * rows_per_rank + row0) * nv + c0;                // in D and C
    constexpr int kUnroll = kUnrollFor<kW>;
    for (int64_t v0 = threadIdx.x; v0 < count; v0 += kThreads * kUnroll) {
      // Every rank's vectors in flight before the first add (NVLink latency); summed in rank
      // order, so the result is reproducible. Loads through L2 only: a line this SM read in an
      // earlier call must not be served stale from its L1.
      float acc[kUnroll][8] = {};
      uint4 x[kUnroll][kW > 0 ? kW : 1];
#pragma unroll
      for (int i = 0; i < kUnroll; ++i) {
        const int64_t v = v0 + i * kThreads;
        if (v >= count) continue;
        const int64_t off = src0 + v / tile_nv * nv + v % tile_nv;
        if constexpr (kW > 0) {
#pragma unroll
          for (int q = 0; q < kW; ++q) x[i][q] = __ldcg(static_cast<const uint4*>(a.partial[q]) + off);
        } else {
          for (int q = 0; q < world; ++q) add_raw8<T>(__ldcg(static_cast<const uint4*>(a.partial[q]) + off), acc[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < kUnroll; ++i) {
        const int64_t v = v0 + i * kThreads;
        if (v >= count) continue;
        if constexpr (kW > 0) {
#pragma unroll
          for (int q = 0; q < kW; ++q) add_raw8<T>(x[i][q], acc[i]);
        }
        const int64_t at = dst0 + v / tile_nv * nv + v % tile_nv;
        if (a.c != nullptr) {
          float cv[8];
          widen8<T>(static_cast<const uint4*>(a.c)[at], cv);
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[i][e] += a.beta * cv[e];
        }
        static_cast<uint4*>(a.d)[at] = pack8<T>(acc[i]);
      }
    }
    __syncthreads();  // every load of the unit has returned (its value was used)
    if (threadIdx.x == 0) {
      __threadfence();
      const unsigned long long done = atomicAdd(reinterpret_cast<unsigned long long*>(a.control + 2), 1ull) + 1;
      if (done == seq * units) finish_call(a, seq);
    }
  }
}

struct TileReduceKernel {
  template <typename T, int W>
  const void* operator()() const { return reinterpret_cast<const void*>(tile_reduce_kernel<T, W>); }
};

}  // namespace

void preload_tile_reduce(DType dtype, int world) {
  load_kernel_now(begin_call_kernel);
  cudaFuncAttributes attributes{};
  TPGEMM_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel_instance(dtype, world, TileReduceKernel{})));
}

void launch_begin_call(uint64_t* control, cudaStream_t stream) {
  begin_call_kernel<<<1, 1, 0, stream>>>(control);
  TPGEMM_CUDA_CHECK(cudaGetLastError());
}

void launch_tile_reduce(const TileReduceArgs& args, DType dtype, int blocks, cudaStream_t stream) {
  TPGEMM_ASSERT(args.world >= 1 && args.world <= 32 && args.n % 8 == 0 && args.m % (args.world * kTileReduceM) == 0 &&
                args.units == args.l * (args.m / args.world / kTileReduceM) * args.n_tiles);
  TileReduceArgs a = args;
  void* params[] = {&a};
  TPGEMM_CUDA_CHECK(cudaLaunchKernel(kernel_instance(dtype, args.world, TileReduceKernel{}), dim3(blocks),
                                     dim3(kThreads), params, 0, stream));
}

}  // namespace tpgemm::ops
