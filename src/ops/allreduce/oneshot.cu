// One-shot all-reduce: every rank stores its input into slot `rank` of every rank's staging
// buffer (NVLink stores: no round trip, no fence, no flag: NOTE [empty lanes]) and sums the W
// slots of its own buffer as they fill. The latency is one store flight; each GPU sends
// (W - 1) x the data, so it suits small messages.
#include "ops/allreduce/allreduce_device.cuh"

namespace tpgemm::ops {
namespace {

// Staging, per half (NOTE [two staging halves]): W slots of the capacity (NOTE [staging by
// capacity]), slot q written by rank q.
template <typename T, int kW>
__global__ void __launch_bounds__(kAllReduceThreads) oneshot_kernel(const __grid_constant__ SymmCollectiveArgs a) {
  __shared__ uint4* slot_at[2][32];  // my slot in every rank's staging half
  __shared__ uint4* slots[2][32];    // every slot of my own staging half
  const int me = a.env.rank;
  const int world = kW > 0 ? kW : a.world;
  const int64_t vecs = a.count / 8;
  const int64_t stride = a.stride;  // NOTE [staging by capacity]: not this launch's grid
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  fill_slot_tables(a, world, a.slot_vecs, world * a.slot_vecs, slot_at, slots);
  comm::wait_prior_grid();  // NOTE [dependent launch]
  const uint4 in_first = first_vector(a, first, vecs);  // NOTE [one-load prologue]
  uint64_t e;
  if (!begin_call(a, e)) return;
  const int h = static_cast<int>(e & 1);
  constexpr int kU = kUnrollFor<kW>;
  const uint4* in = static_cast<const uint4*>(a.in);

  for (int64_t v = first; v < vecs; v += stride) {
    const uint4 x = never_empty(v == first ? in_first : in[v]);
    for (int q = 0; q < world; ++q)
      if (q == me || !a.drop_sends) slot_at[h][q][v] = x;
  }
  for (int64_t v = first; v < vecs; v += stride * kU) {
    float acc[kU][8];
    if (!sum_slots<T, kW, kU>(slots[h], world, v, stride, vecs, a.env, comm::WaitSite::kAllReduceStart, acc)) return;
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (v + u * stride < vecs) write_out<T>(a, v + u * stride, pack8<T>(acc[u]));
  }
  end_call(a, e);
}

struct OneshotKernel {
  template <typename T, int W>
  const void* operator()() const { return reinterpret_cast<const void*>(oneshot_kernel<T, W>); }
};

}  // namespace

const void* oneshot_fn(DType dtype, int world) { return kernel_instance(dtype, world, OneshotKernel{}); }

int64_t oneshot_stage_elems(int64_t count, int world) { return 2 * int64_t(world) * count; }

}  // namespace tpgemm::ops
