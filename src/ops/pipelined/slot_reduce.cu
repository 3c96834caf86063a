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
  // Vectors of 8: over the block's rows * n elements where D and C are packed (n may then be any
  // length: along N a row is one of D's columns); row by row at a stride (n a multiple of 8).
  const bool strided = a.d_ld != a.n || (a.c != nullptr && a.c_ld != a.n);
  const int64_t row_vecs = strided ? a.n / 8 : a.rows * a.n / 8, per_batch = strided ? a.rows * row_vecs : row_vecs;
  const int64_t total = per_batch * a.l;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = v / per_batch, in_batch = v - b * per_batch;
    const int64_t row = in_batch / row_vecs, col = (in_batch - row * row_vecs) * 8;  // (packed: row 0)
    const int64_t src = b * a.recv_batch_elems + (a.row0 + row) * a.n + col;
    const int64_t dst = b * a.d_batch_elems + (a.d_row0 + row) * a.d_ld + col;
    float acc[8] = {};
    for (int s = 0; s < a.world; ++s) add8(recv + s * a.slot_elems + src, acc);
    if (reduced != nullptr) {
      // Peers receive the plain sum; beta * C is this rank's own and is added to its D only.
      store8(reduced + src, acc);
    }
    if (c != nullptr) {
      float x[8];
      load8(c + b * a.c_batch_elems + (a.d_row0 + row) * a.c_ld + col, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += a.beta * x[i];
    }
    store8(d + dst, acc);
  }
}

}  // namespace

void launch_slot_reduce(const SlotReduceArgs& a, DType dtype, int num_sms, cudaStream_t stream) {
  TPGEMM_ASSERT(a.d_ld >= a.n && (a.c == nullptr || a.c_ld >= a.n));
  TPGEMM_ASSERT((a.d_ld == a.n && (a.c == nullptr || a.c_ld == a.n)) || a.n % 8 == 0);
  const int threads = 256;  // >= world (checked when the plan is made: world <= 32)
  const int64_t vecs = a.l * a.rows * a.n / 8;
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((vecs + threads - 1) / threads, num_sms * 4)));
  if (dtype == DType::kBF16) slot_reduce_kernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>(a);
  else slot_reduce_kernel<__half><<<blocks, threads, 0, stream>>>(a);
  TPGEMM_CHECK_LAUNCH();
}

}  // namespace tpgemm::ops
