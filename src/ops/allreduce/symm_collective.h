// Collectives over symmetric memory: the all-reduce that GEMM+AllReduce's latency paths build on
// (as in PyTorch's symm-mem-recipes), its first half (a reduce-scatter) and an
// all-gather, for the ops whose matmul is too small to overlap. Every NVLink transfer is a
// store into a peer's staging buffer, and the data is its own flag (NOTE [empty lanes],
// allreduce_device.cuh):
//   one-shot: every rank stores its input into a slot of every rank's staging and sums the W
//             slots of its own as they fill;
//   two-shot: every rank stores slice q into a slot of rank q's staging, rank q sums them and
//             stores the sum into every rank's gather area, which each rank copies out;
//   reduce-scatter: two-shot's first shot; rank q's output is slice q of the sum;
//   all-gather: every rank stores its input into a slot of every rank's staging and copies
//             its own slots out as they fill.
// fp32 accumulation in rank order 0..W-1: every rank gets bitwise the same sum, every run.
// Staging per rank: one-shot and all-gather 2 W x the input, two-shot about 4 x, reduce-scatter
// about 2 x.
//
// NOTE [two staging halves]
// Call e uses half e % 2 of the staging buffer; block b's call number e is a per-block counter
// in this rank's own device memory (so CUDA-graph replays need nothing special). The work is split into fixed
// per-block portions, the same on every rank, so block b only ever waits for block b of its
// peers: no grid-wide barrier, no cooperative launch, no end barrier. A reader empties each
// vector it consumed. A peer stores into half e % 2 again only in call e + 2, which it reaches
// once its call e + 1 has read data I stored in my call e + 1, which began after my call e (and
// its emptying) ended: stream order, then causality.
//
// NOTE [staging by capacity]
// A call may move fewer elements than the plan was made for (a per-call count, the same on every
// rank). It launches only the blocks that have vectors of their own this call (of the message; of
// a slice for two-shot and the reduce-scatter), so block b's call counter counts the calls that
// launched it, on every rank alike. For the argument above to hold per block, a place in the
// staging must belong to one block in every call, and each half must stay where it is: the
// staging is laid out for the plan's count (halves, slot q at q x the capacity, two-shot's gather
// area after W full slots) and a thread's vectors are strided by the plan's grid, not the call's.
// Every vector a call stored is emptied by that call. tests/unit/test_allreduce_protocol.cpp
// models calls of random counts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "comm/device/wait_env.h"
#include "comm/symmetric.h"
#include "core/cuda_raii.h"
#include "plan/problem.h"
#include "tpgemm/types.h"

namespace tpgemm::detail {
struct TeamState;
}

namespace tpgemm::ops {

struct SymmCollectiveArgs {
  const void* in = nullptr;         // this rank's input (any device memory; may be `out`)
  // Every rank's staging buffer, 2 halves, by value: the kernels read them from the parameter
  // bank, not global memory (NOTE [one-load prologue], allreduce_device.cuh).
  void* stage[plan::kMaxSymmetricWorld] = {};
  uint64_t* calls = nullptr;        // this rank's per-block call counters
  int64_t count = 0;                // elements of the input this call, a multiple of 8
  // Vectors of input the staging is laid out for (the plan's count), and the stride of a
  // thread's vectors: the plan's blocks x threads (NOTE [staging by capacity]).
  int64_t slot_vecs = 0;
  int64_t stride = 0;
  int64_t batches = 1;              // all-gather: the input is [batches][block], the output [batches][W][block]
  void* out = nullptr;
  const void* c = nullptr;          // optional: out = sum + beta * c (c is this rank's own)
  float beta = 0.0f;
  int world = 1;
  bool scatter_only = false;        // two-shot's first shot only: `out` and `c` hold this rank's slice
  bool drop_sends = false;          // test hook: store nothing into peers (they must time out)
  comm::WaitEnv env;
};

constexpr int kAllReduceThreads = 512;  // per block at most, every kernel here (TPGEMM_SYMM_THREADS: fewer)

// Each kernel for a dtype and world size (launched with one SymmCollectiveArgs), and the
// elements of symmetric staging it needs per rank (two halves).
const void* oneshot_fn(DType dtype, int world);          // oneshot.cu
const void* twoshot_fn(DType dtype, int world);          // twoshot.cu
const void* allgather_fn(int world);                     // allgather.cu (any 16-bit type)
int64_t oneshot_stage_elems(int64_t count, int world);  // oneshot.cu: W slots of count
int64_t twoshot_stage_elems(int64_t count, int world, bool scatter_only);  // twoshot.cu: W slice slots (+ W more)

enum class SymmAlgo { kOneShot, kTwoShot, kReduceScatter, kAllGather };

class SymmCollective {
 public:
  // Collective. `count` elements of input per rank. kReduceScatter needs count / 8 to be a
  // multiple of the world size (equal slices); kAllGather's count / 8 a multiple of `batches`.
  SymmCollective(std::shared_ptr<detail::TeamState> team, int64_t count, DType dtype, SymmAlgo algo,
                 int64_t batches = 1);
  int64_t count() const { return count_; }
  // out = sum over ranks of in (+ beta * c), `count` elements (0: the plan's; at most that, and
  // on every rank the same, with the divisibility above); kReduceScatter: this rank's slice of
  // it, count / W elements (c too); kAllGather: every rank's input, W x count elements ([batches]
  // [W][block]; c must be null). `out` may equal `in` (not for kAllGather); `c` may not alias
  // `out`. Successive calls on one stream (NOTE [two staging halves]).
  void run(const void* in, void* out, const void* c, float beta, cudaStream_t stream, int64_t count = 0) const;

 private:
  std::shared_ptr<detail::TeamState> team_;
  int64_t count_;
  DType dtype_;
  SymmAlgo algo_;
  int64_t batches_;
  const void* kernel_;  // oneshot_fn, twoshot_fn or allgather_fn
  int threads_;         // per block
  int blocks_;
  bool drop_sends_;  // comm::test_drops_signals
  bool dependent_launch_;  // NOTE [dependent launch] (comm/device/sync.cuh); TPGEMM_SYMM_PDL=0: launched plainly
  comm::SymmetricBuffer stage_;
  DeviceBuffer calls_;
};

}  // namespace tpgemm::ops
