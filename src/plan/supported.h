// What each implementation takes, as the planner sees it: the team's topology, and per
// implementation the problems it serves (impl_supported), each refusal saying what was asked,
// what it takes instead and which implementation does. Pure host logic.
#pragma once

#include <cstdint>

#include "tpgemm/error.h"
#include "tpgemm/types.h"

namespace tpgemm::plan {

// Can `impl` write the gathered A out (PlanOptions::return_gathered_a)? ag_gemm along M only.
Status gathered_a_supported(const GemmProblem& p, Impl impl);

// What a team can do, as the planner sees it.
// Every symmetric-memory implementation serves teams up to this size: the symmetric collectives
// keep one pointer per rank in shared memory, and the signal pads' barrier is one warp.
constexpr int kMaxSymmetricWorld = 32;

struct Topology {
  int world = 1;
  bool all_lsa_peers = false;  // every rank reachable by NVLink loads/stores
  // Every rank's GPU is sm_90, which tpgemm's Hopper GEMM core (fused, gather_then_gemm) needs.
  // A team sets it from its GPUs; the default describes the H100/H200 teams the rules model.
  bool all_sm90 = true;
  // SMs per GPU, as the team's device reports them. The default is an H100 / H200 SXM's, the
  // GPUs the fallback rules (choose.cpp) were measured on.
  int num_sms = 132;
  // This rank's GPU has FP8 tensor cores (compute capability 8.9 or newer), which e4m3 and e5m2 need.
  bool fp8 = true;
};

// Can `impl` run `p` on this topology? (kAuto is always accepted.)
Status impl_supported(const GemmProblem& p, Impl impl, const Topology& topo);

// fused gemm_ar's decode kernel (NOTE [fused decode] in ops/gemm_ar/fused_decode.h) runs problems
// of at most this many rows, on teams of two or more, where the tile reduction (NOTE [tile
// all-reduce]) cannot: M not whole 128-row tiles per rank. Its tiles are 16 to 128 rows (the
// most that divides M, so M a multiple of 16) by 64 columns, 64 columns of K per stage, B as [N, K].
constexpr int64_t kFusedDecodeMaxM = 256;
inline bool fused_ar_decode(const GemmProblem& p, int world) {
  return p.op == Op::kGemmAr && world > 1 && p.m % (128 * static_cast<int64_t>(world)) != 0 &&
         p.m <= kFusedDecodeMaxM && p.m % 16 == 0 && p.n % 64 == 0 && p.k % 64 == 0 && p.b_layout == BLayout::kNK;
}

}  // namespace tpgemm::plan
