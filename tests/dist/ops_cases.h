// What the dist tests of the ops share: the fixture (its parameter the number of ranks, W = 2, 4
// and 8, instantiated in test_ops.cpp) and the small problems they check, whose sizes are not
// multiples of 64 or 128 anywhere.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "tpgemm/plan.h"

namespace tpgemm {

class Dist : public ::testing::TestWithParam<int> {};

// Every implementation of `op` the tests check, auto last.
inline std::vector<Impl> impls_for(Op op) {
  if (op == Op::kGemmAr)
    return {Impl::kBaseline, Impl::kPipelinedCE, Impl::kGemmOneShot, Impl::kGemmTwoShot, Impl::kFused, Impl::kAuto};
  if (op == Op::kAgGemm)
    return {Impl::kBaseline, Impl::kPipelinedCE, Impl::kFused, Impl::kNaiveRemote, Impl::kThreadloadGather,
            Impl::kGatherThenGemm, Impl::kAllGatherGemm, Impl::kAuto};
  return {Impl::kBaseline, Impl::kPipelinedCE, Impl::kFused, Impl::kGemmReduceScatter, Impl::kAuto};
}


inline GemmProblem problem(Op op, int world, DType dt, BLayout layout, int variant, Impl impl = Impl::kAuto) {
  GemmProblem p;
  p.op = op;
  // Not multiples of 64 or 128 anywhere; gemm_ar's M is not a multiple of W either (the fused
  // gemm_ar's last tile row cut short). The fused gemm_rs takes whole 128-row tiles per rank: two each.
  p.m = world * 100 + (op == Op::kGemmAr ? world - 1 : 0);
  if (op == Op::kGemmRs && impl == Impl::kFused) p.m = world * 256;
  p.n = 136;
  p.k = 200;
  p.dtype = dt;
  p.b_layout = layout;
  if (variant == 1) {  // batched, scaled, with C
    p.l = 2;
    p.alpha = 0.5f;
    p.beta = -1.25f;
    p.has_c = true;
  }
  return p;
}

}  // namespace tpgemm
