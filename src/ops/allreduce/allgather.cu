// All-gather over symmetric memory: every rank stores its input into slot `rank` of every
// peer's staging buffer (NVLink stores, the data its own flag: NOTE [empty lanes]) and copies
// its own staging slots out as they fill, emptying them. One store flight; each GPU sends
// (W - 1) x its input. A zero's sign is not kept (a -0.0 arrives as +0.0, on every rank alike).
#include "ops/allreduce/allreduce_device.cuh"

namespace tpgemm::ops {
namespace {

// Staging, per half (NOTE [two staging halves]): W slots of the capacity (NOTE [staging by
// capacity]), slot q written by rank q. The input is `batches` entries of `block` vectors; rank q's entry l lands at entry
// l * W + q of the output ([batches][W][block]: ag_gemm's gathered A is [L][M][K]).
template <int kW>
__global__ void __launch_bounds__(kAllReduceThreads) allgather_kernel(const __grid_constant__ SymmCollectiveArgs a) {
  __shared__ uint4* slot_at[2][32];  // my slot in every rank's staging half
  __shared__ uint4* slots[2][32];    // every slot of my own staging half
  const int me = a.env.rank;
  const int world = kW > 0 ? kW : a.world;
  const int64_t vecs = a.count / 8, block = vecs / a.batches;
  const int64_t stride = a.stride;  // NOTE [staging by capacity]: not this launch's grid
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  fill_slot_tables(a, world, a.slot_vecs, world * a.slot_vecs, slot_at, slots);
  comm::wait_prior_grid();  // NOTE [dependent launch]
  const uint4 in_first = first_vector(a, first, vecs);  // NOTE [one-load prologue]
  uint64_t e;
  if (!begin_call(a, e)) return;
  const int h = static_cast<int>(e & 1);
  const uint4* in = static_cast<const uint4*>(a.in);
  uint4* out = static_cast<uint4*>(a.out);
  const auto out_at = [&](int q, int64_t v) { return (v / block * world + q) * block + v % block; };

  for (int64_t v = first; v < vecs; v += stride) {
    const uint4 x = v == first ? in_first : in[v];
    out[out_at(me, v)] = plain_zeros(x);  // as the peers will see it
    if (a.drop_sends) continue;
    const uint4 sent = never_empty(x);
    for (int s = 1; s < world; ++s) slot_at[h][(me + s) % world][v] = sent;
  }
  for (int s = 1; s < world; ++s) {
    const int q = (me + s) % world;
    uint4* slot = slots[h][q];
    for (int64_t v = first; v < vecs; v += stride) {
      uint4 x = ld_volatile(slot + v);
      if (!wait_filled(slot + v, x, a.env, q, comm::WaitSite::kAllGatherBlock)) return;
      slot[v] = uint4{};
      out[out_at(q, v)] = plain_zeros(x);
    }
  }
  end_call(a, e);
}

}  // namespace

const void* allgather_fn(int world) {
  switch (world) {
    case 2: return reinterpret_cast<const void*>(allgather_kernel<2>);
    case 4: return reinterpret_cast<const void*>(allgather_kernel<4>);
    case 8: return reinterpret_cast<const void*>(allgather_kernel<8>);
    default: return reinterpret_cast<const void*>(allgather_kernel<0>);
  }
}

}  // namespace tpgemm::ops
