// All-reduce over symmetric memory, the building block of GEMM+AllReduce's latency paths
// (shared/seeds/symm-mem-recipes-readme.txt):
//   one-shot: every rank reads every peer's whole buffer and reduces it itself;
//   two-shot: rank r reduces slice r of every buffer into its own buffer (reduce-scatter),
//             then every rank reads each slice from its owner (all-gather).
// fp32 accumulation in rank order 0..W-1: every rank gets bitwise the same sum, every run.
//
// NOTE [all-reduce flags]
// A pad of 3 groups of W flags (start, middle, end; slot = source rank) and a local control
// word set (epoch, blocks past phase 1, blocks done; monotonic, so nothing is ever reset).
//   start:  "my input is complete"       raised by block 0, awaited by every block
//   middle: "my slice is reduced"        two-shot; raised once all my blocks passed phase 1
//   end:    "I am done reading your buffer" raised by the last block to finish; awaited by it,
//           so the kernel ends only when every peer is done with this rank's buffer, and the
//           next call may overwrite it.
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
  void* const* bufs = nullptr;      // every rank's symmetric input buffer (device table)
  uint64_t* const* pads = nullptr;  // every rank's flag pad (device table)
  uint64_t* control = nullptr;      // this rank's [epoch, phase-1 blocks, finished blocks]
  int64_t count = 0;                // elements, a multiple of 8
  void* out = nullptr;
  bool out_is_input = false;        // two-shot in place: phase 1's sum is already the result
  const void* c = nullptr;          // optional: out = sum + beta * c (c is this rank's own)
  float beta = 0.0f;
  int world = 1;
  comm::WaitEnv env;
};

void launch_oneshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream);   // oneshot.cu
void launch_twoshot(const SymmAllReduceArgs& a, DType dtype, int blocks, cudaStream_t stream);   // twoshot.cu
int twoshot_max_blocks(DType dtype, int num_sms);  // co-resident blocks: two-shot syncs its whole grid

class SymmAllReduce {
 public:
  // Collective. `two_shot` picks the algorithm; `in_place` allows out == input() (one-shot then
  // needs a scratch buffer of the input's size).
  SymmAllReduce(std::shared_ptr<detail::TeamState> team, int64_t count, DType dtype, bool two_shot, bool in_place);
  void* input() const { return buffer_.local(); }
  int64_t count() const { return count_; }
  // out = sum over ranks of input() (+ beta * c). input() must be written before, in stream order.
  // out may be input() when c is null and the plan was made in_place (one-shot then reduces into
  // a scratch buffer and copies: peers are still reading input() while it reduces).
  void run(void* out, const void* c, float beta, cudaStream_t stream) const;

 private:
  std::shared_ptr<detail::TeamState> team_;
  int64_t count_;
  DType dtype_;
  bool two_shot_;
  int blocks_;
  comm::SymmetricBuffer buffer_, pad_;
  DeviceBuffer control_;
  DeviceBuffer scratch_;  // one-shot in place
};

}  // namespace tpgemm::ops
