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

// Staging, per half (NOTE [two staging halves]), in vectors: W scatter slots of one slice of the
// capacity each (slot s written by rank s), then (all-reduce only) the gather area of W such
// slices (slice q written by rank q): a vector's place depends on its slice and its index in
// the slice, never on the call's count (NOTE [staging by capacity]). Block b handles the same
// indices of every slice on every rank, so it only ever waits for block b of its peers.
template <typename T, int kW>
__global__ void __launch_bounds__(kAllReduceThreads) twoshot_kernel(const __grid_constant__ SymmCollectiveArgs a) {
  // Per staging half and rank q, each a slot or area of the capacity's slice, so that nothing of
  // the layout stays live in registers past the prologue:
  __shared__ uint4* scatter_tables[2][32];  // my slot in rank q's half
  __shared__ uint4* slot_tables[2][32];     // rank q's slot in my half, indexed by the vector's place in the buffer
  __shared__ uint4* sum_tables[2][32];      // my slice's place in rank q's gather area, indexed likewise
  __shared__ uint4* gather_tables[2][32];   // slice q's place in my gather area
  const int me = a.env.rank;
  const int world = kW > 0 ? kW : a.world;
  const int64_t vecs = a.count / 8;
  const int64_t cap = slice_vecs(a.slot_vecs, world);  // a slot, and a slice of the gather area
  const Slice own = slice_of(vecs, world, me);
  const int64_t stride = a.stride;  // NOTE [staging by capacity]: not this launch's grid
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (threadIdx.x < world) {
    const int q = threadIdx.x;
    const int64_t half_vecs = world * cap * (a.scatter_only ? 1 : 2);
    for (int h = 0; h < 2; ++h) {
      scatter_tables[h][q] = stage_half(a, q, h, half_vecs) + me * cap;
      slot_tables[h][q] = stage_half(a, me, h, half_vecs) + q * cap - own.begin;
      sum_tables[h][q] = stage_half(a, q, h, half_vecs) + (world + me) * cap - own.begin;
      gather_tables[h][q] = stage_half(a, me, h, half_vecs) + (world + q) * cap;
    }
  }
  comm::wait_prior_grid();  // NOTE [dependent launch]
  // NOTE [one-load prologue]: the first vector the scatter below sends (slice me + 1's).
  const Slice first_slice = slice_of(vecs, world, (me + 1) % world);
  const uint4 in_first = first_vector(a, first_slice.begin + first, first_slice.end);
  uint64_t e;
  if (!begin_call(a, e)) return;
  uint4* const* scatter_at = scatter_tables[e & 1];
  uint4* const* slots = slot_tables[e & 1];
  uint4* const* sums_at = sum_tables[e & 1];
  constexpr int kU = kUnrollFor<kW>;
  const uint4* in = static_cast<const uint4*>(a.in);

  // Scatter: my portion of slice q into slot `me` of rank q.
  for (int s = 1; s <= world; ++s) {
    const int q = (me + s) % world;  // my own slice last
    const Slice sl = slice_of(vecs, world, q);
    uint4* slot = scatter_at[q] - sl.begin;
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
#pragma unroll 1  // (unrolled, the peers' W - 1 addresses stay live beside the W inputs: spills at W = 8)
        for (int q = 0; q < world; ++q)
          if (q != me && !a.drop_sends) sums_at[q][v + u * stride] = sum;
        write_out<T>(a, v + u * stride, sum);
      }
  }
  if (a.scatter_only) {
    end_call(a, e);
    return;
  }
  // Gather: my portion of every other slice, from my gather area as it fills.
  for (int s = 1; s < world; ++s) {
    const int q = (me + s) % world;
    const Slice sl = slice_of(vecs, world, q);
    uint4* gathered = gather_tables[e & 1][q] - sl.begin;  // slice q, indexed like the output
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
  return 2 * world * slice_vecs(count / 8, world) * (scatter_only ? 1 : 2) * 8;
}

}  // namespace tpgemm::ops
