// The reduction at the end of a pipelined reduce-scatter: wait until every peer's partial has
// arrived in my receive slots, sum the W slots in fp32 in slot order 0..W-1 (so every run,
// and every rank of an all-reduce, gets bitwise the same result), add beta * C, store D.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "comm/device/wait_env.h"
#include "tpgemm/types.h"

namespace tpgemm::ops {

struct SlotReduceArgs {
  const void* recv = nullptr;     // my receive buffer, slot 0
  int64_t slot_elems = 0;         // elements between slots
  int64_t recv_batch_elems = 0;   // elements between batch entries within a slot
  int64_t row0 = 0, rows = 0;     // rows of my block to reduce
  int64_t n = 0, l = 1;
  void* d = nullptr;              // the caller's D
  int64_t d_batch_elems = 0;
  int64_t d_row0 = 0;             // where row0 lands in D
  int64_t d_ld = 0;               // elements between rows of D (n where packed)
  const void* c = nullptr;        // optional; rows as D's, c_ld elements apart, entries c_batch_elems
  int64_t c_ld = 0;
  int64_t c_batch_elems = 0;
  float beta = 0.0f;
  void* reduced = nullptr;        // optional copy of the result, laid out like one receive slot
  const uint64_t* arrive = nullptr;  // my arrival flags, one per source rank
  const uint64_t* seq = nullptr;     // seq[round]: the value this call's flags carry
  int round = 0;
  int world = 1;
  comm::WaitEnv env;
};

void launch_slot_reduce(const SlotReduceArgs& args, DType dtype, int num_sms, cudaStream_t stream);

}  // namespace tpgemm::ops
