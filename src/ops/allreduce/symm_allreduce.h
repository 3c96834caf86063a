// All-reduce over symmetric memory, the building block of GEMM+AllReduce's latency paths
// (shared/seeds/symm-mem-recipes-readme.txt):
//   one-shot: every rank reads every peer's whole buffer and reduces it itself;
//   two-shot: rank r reduces slice r of every buffer (reduce-scatter), then every rank reads
//             each reduced slice from its owner (all-gather).
// fp32 accumulation in rank order 0..W-1: every rank gets bitwise the same sum, every run.
//
// NOTE [all-reduce flags]
// The work is split into fixed per-block portions, the same on every rank (block b of every
// rank handles the same vectors), so block b only ever waits for block b of its peers: there
// is no grid-wide barrier, and no cooperative launch.
//   1. Block b copies its portion of the caller's input into the symmetric staging buffer's
//      half for this call (call parity), then raises start[b] in every peer's pad.
//   2. It waits for start[b] from every peer, and reduces (one-shot: its portion of every
//      rank's half; two-shot: the part of its portion in slice `rank`, written back in place).
//   3. Two-shot: raises middle[b], waits for it from every peer, reads the other slices.
// No end barrier: a rank writes a half again only two calls later, after it has seen every
// peer's start[b] of the call in between, which a peer raises only once its kernel of the
// call before (the last reader of that half) has ended (stream order).
// Flags hold block b's call number (a per-block counter in local memory): monotonic, so
// nothing is ever reset and CUDA-graph replays need nothing special.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "comm/device/wait_env.h"
#include "comm/symmetric.h"
#include "core/cuda_raii.h"
#include "tpgemm/types.h"

namespace tpgemm::detail {
struct TeamState;
}

namespace tpgemm::ops {

struct SymmAllReduceArgs {
  const void* in = nullptr;         // this rank's input (any device memory; may be `out`)
  void* const* stage = nullptr;     // every rank's staging buffer, 2 halves of `count` (device table)
  uint64_t* const* pads = nullptr;  // every rank's flags [group][block][source rank] (device table)
  uint64_t* calls = nullptr;        // this rank's per-block call counters
  int64_t count = 0;                // elements, a multiple of 8
  void* out = nullptr;
  const void* c = nullptr;          // optional: out = sum + beta * c (c is this rank's own)
  float beta = 0.0f;
  int world = 1;
  comm::WaitEnv env;
};

void launch_oneshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream);  // oneshot.cu
void launch_twoshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream);  // twoshot.cu
const void* oneshot_fn(DType dtype, int world);  // the kernel launch_oneshot runs
const void* twoshot_fn(DType dtype, int world);  // the kernel launch_twoshot runs
// Blocks of the kernel that fit on the GPU at once: block b waits for block b of each peer,
// so every block must be resident (a bounded wait reports it if a peer's never runs).
int allreduce_max_blocks(DType dtype, int world, bool two_shot, int num_sms);  // twoshot.cu

class SymmAllReduce {
 public:
  // Collective. `two_shot` picks the algorithm.
  SymmAllReduce(std::shared_ptr<detail::TeamState> team, int64_t count, DType dtype, bool two_shot);
  int64_t count() const { return count_; }
  // out = sum over ranks of in (+ beta * c), count elements. `out` may equal `in`; `c` may not
  // alias `out`. Successive calls on one stream (NOTE [all-reduce flags]).
  void run(const void* in, void* out, const void* c, float beta, cudaStream_t stream) const;

 private:
  std::shared_ptr<detail::TeamState> team_;
  int64_t count_;
  DType dtype_;
  bool two_shot_;
  int blocks_;
  comm::SymmetricBuffer stage_, pad_;
  DeviceBuffer calls_;
};

}  // namespace tpgemm::ops
