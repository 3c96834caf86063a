// Two-shot all-reduce: rank r reduces slice r of all W buffers into its own buffer
// (reduce-scatter), then every rank reads each reduced slice from its owner (all-gather).
// Each GPU takes in 2 (W - 1) / W of the data, like a ring, in two flag round trips.
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

template <typename T>
__global__ void __launch_bounds__(kAllReduceThreads) twoshot_kernel(SymmAllReduceArgs a) {
  __shared__ T* bufs[32];
  if (comm::tripped(a.env)) return;
  const uint64_t e = call_epoch(a);
  const int me = a.env.rank;
  if (threadIdx.x < a.world) bufs[threadIdx.x] = static_cast<T*>(a.bufs[threadIdx.x]);
  if (blockIdx.x == 0) raise_all(a, kStartGroup, e);
  if (!await_all(a, kStartGroup, e, comm::WaitSite::kAllReduceStart)) return;

  T* out = static_cast<T*>(a.out);
  const int64_t vecs = a.count / 8;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  // Phase 1: reduce my slice of every buffer into my buffer (the plain sum: peers read it).
  const Slice mine = slice_of(vecs, a.world, me);
  for (int64_t v = mine.begin + first; v < mine.end; v += stride) {
    float acc[8] = {};
    for (int q = 0; q < a.world; ++q) add8(bufs[q] + v * 8, acc);
    store8(bufs[me] + v * 8, acc);
    if (!a.out_is_input) {
      add_beta_c<T>(a, v * 8, acc);
      store8(out + v * 8, acc);
    }
  }
  // Once every block of this rank has passed phase 1, block 0 tells the peers my slice is ready.
  // (The grid is co-resident: it is launched cooperatively.)
  arrive_block(a, 1, e);
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0)
      while (*reinterpret_cast<volatile unsigned long long*>(a.control + 1) < e * gridDim.x && !comm::tripped(a.env)) {
      }
    if (!__syncthreads_and(!comm::tripped(a.env))) return;
    raise_all(a, kMiddleGroup, e);
  }
  if (!await_all(a, kMiddleGroup, e, comm::WaitSite::kAllReduceMiddle)) return;
  // Phase 2: every other slice from its owner.
  for (int s = 1; s < a.world; ++s) {
    const int q = (me + s) % a.world;
    const Slice sl = slice_of(vecs, a.world, q);
    for (int64_t v = sl.begin + first; v < sl.end; v += stride) {
      float acc[8];
      load8(bufs[q] + v * 8, acc);
      add_beta_c<T>(a, v * 8, acc);
      store8(out + v * 8, acc);
    }
  }
  finish(a, e);
}

}  // namespace

int twoshot_max_blocks(DType dtype, int num_sms) {
  int per_sm = 0;
  if (dtype == DType::kBF16)
    TPGEMM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, twoshot_kernel<__nv_bfloat16>, kAllReduceThreads, 0));
  else
    TPGEMM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, twoshot_kernel<__half>, kAllReduceThreads, 0));
  return std::max(1, std::min(per_sm, 2) * num_sms);
}

void launch_twoshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream) {
  SymmAllReduceArgs args = a;
  void* params[] = {&args};
  const void* fn = dtype == DType::kBF16 ? reinterpret_cast<const void*>(twoshot_kernel<__nv_bfloat16>)
                                         : reinterpret_cast<const void*>(twoshot_kernel<__half>);
  TPGEMM_CUDA_CHECK(cudaLaunchCooperativeKernel(fn, dim3(blocks), dim3(kAllReduceThreads), params, 0, stream));
}

}  // namespace tpgemm::ops
