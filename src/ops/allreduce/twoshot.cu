// Two-shot all-reduce: every rank stores slice q of its input into slot `rank` of rank q's
// staging buffer (reduce-scatter); rank q sums the W slots of its slice as they fill and stores
// the sum into every peer's gather area (all-gather); each rank copies the gather area out as
// it fills. Every NVLink transfer is a store and no flag is needed (NOTE [empty lanes]); each
// GPU sends 2 (W - 1) / W of the data, like a ring, in two store flights.
// With `scatter_only` it stops after the first shot: a reduce-scatter, each rank's output its
// own slice of the sum (slice q = the q-th W-th of the input), with no gather area.
#include "ops/allreduce/allreduce_device.cuh"

namespace tpgemm::ops {
namespace {

struct Slice {
  int64_t begin, end;  // in vectors
};
__host__ __device__ __forceinline__ int64_t slice_vecs(int64_t vecs, int world) { return (vecs + world - 1) / world; }
__device__ __forceinline__ Slice slice_of(int64_t vecs, int world, int q) {
  const int64_t per = slice_vecs(vecs, world);
  return {min(vecs, q * per), min(vecs, (q + 1) * per)};
}

// Staging, per half (NOTE [two staging halves]), in vectors: W scatter slots of one slice each
// (slot s written by rank s), then (all-reduce only) the gather area of all `vecs` (slice q
// written by rank q). Block b handles the same vectors of every slice on every rank, so it only
// ever waits for block b of its peers.
template <typename T, int kW>
__global__ void __launch_bounds__(kAllReduceThreads) twoshot_kernel(const __grid_constant__ SymmCollectiveArgs a) {
  __shared__ uint4* stages[2][32];  // every rank's staging half
  __shared__ uint4* slot_tables[2][32];  // my scatter slots, indexed by the vector's place in the whole buffer
  const int me = a.env.rank;
  const int world = kW > 0 ? kW : a.world;
  const int64_t vecs = a.count / 8;
  const int64_t per = slice_vecs(vecs, world);
  const Slice own = slice_of(vecs, world, me);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  // NOTE [one-load prologue]: the first vector the scatter below sends (slice me + 1's).
  const Slice first_slice = slice_of(vecs, world, (me + 1) % world);
  const uint4 in_first = first_vector(a, first_slice.begin + first, first_slice.end);
  if (threadIdx.x < world) {
    const int q = threadIdx.x;
    const int64_t half_vecs = world * per + (a.scatter_only ? 0 : vecs);
    for (int h = 0; h < 2; ++h) {
      stages[h][q] = stage_half(a, q, h, half_vecs);
      slot_tables[h][q] = stage_half(a, me, h, half_vecs) + q * per - own.begin;
    }
  }
  uint64_t e;
  if (!begin_call(a, e)) return;
  uint4* const* stage = stages[e & 1];
  uint4* const* slots = slot_tables[e & 1];
  constexpr int kU = kUnrollFor<kW>;
  const uint4* in = static_cast<const uint4*>(a.in);

  // Scatter: my portion of slice q into slot `me` of rank q.
  for (int s = 1; s <= world; ++s) {
    const int q = (me + s) % world;  // my own slice last
    const Slice sl = slice_of(vecs, world, q);
    uint4* slot = stage[q] + me * per - sl.begin;
    if (q != me && a.drop_sends) continue;
    for (int64_t v = sl.begin + first; v < sl.end; v += stride)
      slot[v] = never_empty(s == 1 && v == sl.begin + first ? in_first : in[v]);
  }
  const comm::WaitSite site = a.scatter_only ? comm::WaitSite::kReduceScatterStart : comm::WaitSite::kAllReduceStart;
  // Reduce my portion of my slice; the sum to every peer's gather area and to my output.
  for (int64_t v = own.begin + first; v < own.end; v += stride * kU) {
    float acc[kU][8];
    if (!sum_slots<T, kW, kU>(slots, world, v, stride, own.end, a.env, site, acc)) return;
#pragma unroll
    for (int u = 0; u < kU; ++u)
      if (v + u * stride < own.end) {
        const uint4 sum = never_empty(pack8<T>(acc[u]));
        if (a.scatter_only) {
          write_out<T>(a, v + u * stride - own.begin, sum);  // out (and c) hold my slice only
          continue;
        }
        for (int q = 0; q < world; ++q)
          if (q != me && !a.drop_sends) stage[q][world * per + v + u * stride] = sum;
        write_out<T>(a, v + u * stride, sum);
      }
  }
  if (a.scatter_only) {
    end_call(a, e);
    return;
  }
  // Gather: my portion of every other slice, from my gather area as it fills.
  uint4* gathered = stage[me] + world * per;
  for (int s = 1; s < world; ++s) {
    const int q = (me + s) % world;
    const Slice sl = slice_of(vecs, world, q);
    for (int64_t v = sl.begin + first; v < sl.end; v += stride) {
      uint4 x = ld_volatile(gathered + v);
      if (!wait_filled(gathered + v, x, a.env, q, comm::WaitSite::kAllReduceMiddle)) return;
      gathered[v] = uint4{};
      write_out<T>(a, v, x);
    }
  }
  end_call(a, e);
}

struct TwoshotKernel {
  template <typename T, int W>
  const void* operator()() const { return reinterpret_cast<const void*>(twoshot_kernel<T, W>); }
};

}  // namespace

const void* twoshot_fn(DType dtype, int world) { return kernel_instance(dtype, world, TwoshotKernel{}); }

int64_t twoshot_stage_elems(int64_t count, int world, bool scatter_only) {
  return 2 * (world * slice_vecs(count / 8, world) + (scatter_only ? 0 : count / 8)) * 8;
}

}  // namespace tpgemm::ops
