// Two-shot all-reduce: rank r reduces slice r of all W buffers into its own staging buffer
// (reduce-scatter), then every rank reads each reduced slice from its owner (all-gather).
// Each GPU takes in 2 (W - 1) / W of the data, like a ring, in two flag round trips.
// NOTE [all-reduce flags]: block b handles the same vectors of every slice on every rank.
#include <algorithm>

#include "core/check.h"
#include "ops/allreduce/allreduce_device.cuh"

namespace tpgemm::ops {
namespace {

struct Slice {
  int64_t begin, end;  // in vectors of 8
};
__device__ __forceinline__ Slice slice_of(int64_t vecs, int world, int q) {
  const int64_t per = (vecs + world - 1) / world;
  return {min(vecs, q * per), min(vecs, (q + 1) * per)};
}

template <typename T, int kW>
__global__ void __launch_bounds__(kAllReduceThreads) twoshot_kernel(SymmAllReduceArgs a) {
  __shared__ T* halves[32];
  if (comm::tripped(a.env)) return;
  const uint64_t e = begin_call(a);
  const int64_t half = (e & 1) * a.count;  // this call's half of every staging buffer
  const int me = a.env.rank;
  if (threadIdx.x < a.world) halves[threadIdx.x] = static_cast<T*>(a.stage[threadIdx.x]) + half;
  constexpr int kU = kUnrollFor<kW>;
  const int64_t vecs = a.count / 8;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  T* mine = static_cast<T*>(a.stage[me]) + half;
  for (int q = 0; q < a.world; ++q) {  // my portion of every slice
    const Slice sl = slice_of(vecs, a.world, q);
    copy_vectors<kU>(static_cast<const uint4*>(a.in), reinterpret_cast<uint4*>(mine), sl.begin + first, stride, sl.end);
  }
  raise_all(a, kStartGroup, e);
  if (!await_all(a, kStartGroup, e, comm::WaitSite::kAllReduceStart)) return;

  // Phase 1: reduce my portion of slice `me` of every rank into my staging buffer, in place
  // (only this block reads those vectors of my buffer before the middle flag).
  T* out = static_cast<T*>(a.out);
  const Slice own = slice_of(vecs, a.world, me);
  for (int64_t v = own.begin + first; v < own.end; v += stride * kU) {
    float acc[kU][8];
    sum_ranks<T, kW, kU>(halves, a.world, v, stride, own.end, acc);
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (v + u * stride < own.end) {
        const int64_t off = (v + u * stride) * 8;
        store8(mine + off, acc[u]);
        round8<T>(acc[u]);  // out gets what the peers will read, plus beta * c, on every slice alike
        add_beta_c<T>(a, off, acc[u]);
        store8(out + off, acc[u]);
      }
  }
  raise_all(a, kMiddleGroup, e);
  if (!await_all(a, kMiddleGroup, e, comm::WaitSite::kAllReduceMiddle)) return;

  // Phase 2: my portion of every other slice, from its owner, kU vectors in flight per thread.
  for (int s = 1; s < a.world; ++s) {
    const int q = (me + s) % a.world;
    const Slice sl = slice_of(vecs, a.world, q);
    if (a.c == nullptr) {
      copy_vectors<kU>(reinterpret_cast<const uint4*>(halves[q]), reinterpret_cast<uint4*>(out), sl.begin + first, stride,
                       sl.end);
      continue;
    }
    for (int64_t v = sl.begin + first; v < sl.end; v += stride) {
      float acc[8];
      load8(halves[q] + v * 8, acc);
      add_beta_c<T>(a, v * 8, acc);
      store8(out + v * 8, acc);
    }
  }
  end_call(a, e);
}

template <typename T>
const void* kernel_for_world(int world) {
  switch (world) {
    case 2: return reinterpret_cast<const void*>(twoshot_kernel<T, 2>);
    case 4: return reinterpret_cast<const void*>(twoshot_kernel<T, 4>);
    case 8: return reinterpret_cast<const void*>(twoshot_kernel<T, 8>);
    default: return reinterpret_cast<const void*>(twoshot_kernel<T, 0>);
  }
}

}  // namespace

const void* twoshot_fn(DType dtype, int world) {
  return dtype == DType::kBF16 ? kernel_for_world<__nv_bfloat16>(world) : kernel_for_world<__half>(world);
}

void launch_twoshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream) {
  SymmAllReduceArgs args = a;
  void* params[] = {&args};
  TPGEMM_CUDA_CHECK(cudaLaunchKernel(twoshot_fn(dtype, a.world), dim3(blocks), dim3(kAllReduceThreads), params, 0, stream));
}

int allreduce_max_blocks(DType dtype, int world, bool two_shot, int num_sms) {
  int per_sm = 0;
  const void* fn = two_shot ? twoshot_fn(dtype, world) : oneshot_fn(dtype, world);
  TPGEMM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, kAllReduceThreads, 0));
  return std::max(1, std::min(per_sm, 2) * num_sms);
}

}  // namespace tpgemm::ops
