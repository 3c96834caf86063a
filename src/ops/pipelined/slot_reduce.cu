#include <algorithm>

#include "comm/device/sync.cuh"
#include "core/check.h"
#include "ops/common/vec.cuh"
#include "ops/pipelined/slot_reduce.h"

namespace tpgemm::ops {
namespace {

template <typename T>
__global__ void slot_reduce_kernel(SlotReduceArgs a) {
  const int q = threadIdx.x;
  if (q < a.world && q != a.env.rank)
    comm::wait_geq(a.arrive + q, a.seq[a.round], a.env, q, comm::WaitSite::kArriveFlag, a.round);
  if (!__syncthreads_and(!comm::tripped(a.env))) return;

  const T* recv = static_cast<const T*>(a.recv);
  T* d = static_cast<T*>(a.d);
  const T* c = static_cast<const T*>(a.c);
  T* reduced = static_cast<T*>(a.reduced);
  const int64_t per_batch = a.rows * a.n / 8;  // vectors of 8 per batch entry
  const int64_t total = per_batch * a.l;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = v / per_batch, off = (v - b * per_batch) * 8;
    const int64_t src = b * a.recv_batch_elems + a.row0 * a.n + off;
    const int64_t dst = b * a.d_batch_elems + a.d_row0 * a.n + off;
    float acc[8] = {};
    for (int s = 0; s < a.world; ++s) add8(recv + s * a.slot_elems + src, acc);
    if (reduced != nullptr) {
      // Peers receive the plain sum; beta * C is this rank's own and is added to its D only.
      store8(reduced + src, acc);
    }
    if (c != nullptr) {
      float x[8];
      load8(c + dst, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += a.beta * x[i];
    }
    store8(d + dst, acc);
  }
}

}  // namespace

void launch_slot_reduce(const SlotReduceArgs& a, DType dtype, int num_sms, cudaStream_t stream) {
  const int threads = 256;  // >= world (checked when the plan is made: world <= 32)
  const int64_t vecs = a.l * a.rows * a.n / 8;
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((vecs + threads - 1) / threads, num_sms * 4)));
  if (dtype == DType::kBF16) slot_reduce_kernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>(a);
  else slot_reduce_kernel<__half><<<blocks, threads, 0, stream>>>(a);
  TPGEMM_CHECK_LAUNCH();
}

}  // namespace tpgemm::ops
