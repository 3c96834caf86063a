// One-shot all-reduce: every rank reads all W buffers over NVLink and reduces them itself.
// Lowest latency (one flag round trip before the data moves); moves (W - 1) x the data into
// each GPU, so it suits small messages. NOTE [all-reduce flags].
#include <algorithm>

#include "core/check.h"
#include "ops/allreduce/allreduce_device.cuh"

namespace tpgemm::ops {
namespace {

template <typename T, int kW>
__global__ void __launch_bounds__(kAllReduceThreads) oneshot_kernel(SymmAllReduceArgs a) {
  __shared__ const T* halves[32];
  if (comm::tripped(a.env)) return;
  const uint64_t e = begin_call(a);
  const int64_t half = (e & 1) * a.count;  // this call's half of every staging buffer
  if (threadIdx.x < a.world) halves[threadIdx.x] = static_cast<const T*>(a.stage[threadIdx.x]) + half;
  constexpr int kU = kUnrollFor<kW>;
  const int64_t vecs = a.count / 8;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  T* mine = static_cast<T*>(a.stage[a.env.rank]) + half;
  copy_vectors<kU>(static_cast<const uint4*>(a.in), reinterpret_cast<uint4*>(mine), first, stride, vecs);
  raise_all(a, kStartGroup, e);
  if (!await_all(a, kStartGroup, e, comm::WaitSite::kAllReduceStart)) return;

  T* out = static_cast<T*>(a.out);
  for (int64_t v = first; v < vecs; v += stride * kU) {
    float acc[kU][8];
    sum_ranks<T, kW, kU>(halves, a.world, v, stride, vecs, acc);
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (v + u * stride < vecs) {
        add_beta_c<T>(a, (v + u * stride) * 8, acc[u]);
        store8(out + (v + u * stride) * 8, acc[u]);
      }
  }
  end_call(a, e);
}

template <typename T>
const void* kernel_for_world(int world) {
  switch (world) {
    case 2: return reinterpret_cast<const void*>(oneshot_kernel<T, 2>);
    case 4: return reinterpret_cast<const void*>(oneshot_kernel<T, 4>);
    case 8: return reinterpret_cast<const void*>(oneshot_kernel<T, 8>);
    default: return reinterpret_cast<const void*>(oneshot_kernel<T, 0>);
  }
}

}  // namespace

const void* oneshot_fn(DType dtype, int world) {
  return dtype == DType::kBF16 ? kernel_for_world<__nv_bfloat16>(world) : kernel_for_world<__half>(world);
}

void launch_oneshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream) {
  SymmAllReduceArgs args = a;
  void* params[] = {&args};
  TPGEMM_CUDA_CHECK(cudaLaunchKernel(oneshot_fn(dtype, a.world), dim3(blocks), dim3(kAllReduceThreads), params, 0, stream));
}

}  // namespace tpgemm::ops
