// The one matmul of the implementations that multiply all of this rank's A before they
// communicate (gemm_ar's baseline, gemm_oneshot, gemm_twoshot).
#pragma once

#include "gemm/lt_matmul.h"
#include "plan/problem.h"

namespace tpgemm::ops {

// All of this rank's A (the call's M rows) times its B into a packed [M, N] product, A and B read
// in place, in their layouts and strides (GemmProblem::a_layout, lda, ldb, batch_stride_a,
// batch_stride_b); with p's scale mode, whose scales cover all of A.
inline gemm::MatmulShape whole_matmul_shape(const GemmProblem& p, int world) {
  gemm::MatmulShape s = gemm::packed_shape(p, p.m, p.n);
  s.lda = plan::a_ld(p, world);
  s.ldb = plan::b_ld(p, world);
  s.stride_a = plan::a_batch_stride(p, world);
  s.stride_b = plan::b_batch_stride(p, world);
  s.a_transposed = p.a_layout == ALayout::kKM;
  return s;
}

}  // namespace tpgemm::ops
