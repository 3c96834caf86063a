// One collective correctness check of a plan, shared by the gpu and dist tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tpgemm/tpgemm.h"

namespace tpgemm::testsupport {

struct PlanCheck {
  Status status;            // an error the plan or a run threw, if any
  Impl ran = Impl::kAuto;   // what the plan chose
  double worst_rel_err = 0;
  int64_t nonfinite = 0;
  bool same_d_on_every_rank = true;  // gemm_ar without C, tpgemm's own implementations
  bool gathered_a_ok = true;         // PlanOptions::return_gathered_a: the whole A, byte for byte
  bool ok = false;          // every run within eps, nothing left unwritten, D alike where it must be
};

// Makes the plan, then `runs` times: fresh random data (seed, seed + 1, ...), D poisoned, one
// run, D compared with an fp32 reference computed on this GPU by a plain CUDA kernel from
// every rank's data. Collective. Optionally captures the run into a CUDA graph and replays it.
// With PlanOptions::return_gathered_a, the gathered A (poisoned before each run) is compared too.
PlanCheck check_plan(const Team& team, const GemmProblem& p, const PlanOptions& options, int runs, uint64_t seed,
                     bool graph = false);

// Makes one plan for `p`, whose M is the largest, and runs it with each M of `ms` in turn
// (Operands::m), each on fresh data with D poisoned over the plan's whole size: the call's part
// must match the reference of its M, the rest must stay untouched. With `graph`, each M is
// prepared, captured into a CUDA graph and replayed instead. Collective.
PlanCheck check_calls_of_m(const Team& team, const GemmProblem& p, const PlanOptions& options,
                           const std::vector<int64_t>& ms, uint64_t seed, bool graph = false);

std::string describe_check(const GemmProblem& p, const PlanOptions& o, const PlanCheck& c);

// Makes an all-reduce plan of `count` elements, then `runs` times: this rank's input drawn from
// `seed` + rank + count (fresh each run, since an in-place run consumes it), the output poisoned
// where it is not the input, one run, the output compared with the fp32 sum of every rank's
// input. Collective. An error message naming the run that failed; empty if all passed.
std::string check_allreduce(const Team& team, int64_t count, DType dtype, AllReduceImpl impl, bool in_place, int runs,
                            uint64_t seed);

// FNV-1a of `bytes` bytes of device memory (copied to the host): equal bits, equal hashes.
uint64_t hash_device_bytes(const void* d, size_t bytes);

}  // namespace tpgemm::testsupport
