// One-shot all-reduce: every rank reads all W buffers over NVLink and reduces them itself.
// Lowest latency (one flag round trip before the data moves); moves (W - 1) x the data into
// each GPU, so it suits small messages.
#include "core/check.h"
#include "ops/allreduce/allreduce_device.cuh"

namespace tpgemm::ops {
namespace {

template <typename T>
__global__ void __launch_bounds__(kAllReduceThreads) oneshot_kernel(SymmAllReduceArgs a) {
  __shared__ const T* bufs[32];
  if (comm::tripped(a.env)) return;
  const uint64_t e = call_epoch(a);
  if (threadIdx.x < a.world) bufs[threadIdx.x] = static_cast<const T*>(a.bufs[threadIdx.x]);
  if (blockIdx.x == 0) raise_all(a, kStartGroup, e);
  if (!await_all(a, kStartGroup, e, comm::WaitSite::kAllReduceStart)) return;

  T* out = static_cast<T*>(a.out);
  const int64_t vecs = a.count / 8;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < vecs; v += int64_t(gridDim.x) * blockDim.x) {
    float acc[8] = {};
    for (int q = 0; q < a.world; ++q) add8(bufs[q] + v * 8, acc);
    add_beta_c<T>(a, v * 8, acc);
    store8(out + v * 8, acc);
  }
  finish(a, e);
}

}  // namespace

void launch_oneshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream) {
  if (dtype == DType::kBF16) oneshot_kernel<__nv_bfloat16><<<blocks, kAllReduceThreads, 0, stream>>>(a);
  else oneshot_kernel<__half><<<blocks, kAllReduceThreads, 0, stream>>>(a);
  TPGEMM_CHECK_LAUNCH();
}

}  // namespace tpgemm::ops
