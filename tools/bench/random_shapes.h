// Shapes nobody chose: the property test of the dist tests (a small fixed draw) and
// tpgemm-bench --random (a large one) draw them from a seed.
#pragma once

#include <cstdint>
#include <vector>

#include "tpgemm/types.h"

namespace tpgemm::bench {

struct RandomShape {
  Op op = Op::kAgGemm;
  int64_t m = 0, n = 0, k = 0;
};

struct ShapeDraw {
  uint64_t seed = 1;
  int per_op = 40;
  int world = 2;
  // Bounds: M up to max_m (global rows), N and K up to max_nk, and the problem's M x N x K at
  // most max_macs multiply-adds (resampled above any of them).
  int64_t max_m = 16384, max_nk = 16384, max_macs = int64_t(1) << 38;
};

// `per_op` shapes for each op: the work M x N x K log-uniform, split among the dimensions at
// random; M from 1 (gemm_ar: M < W too; ag_gemm and gemm_rs: a multiple of W), N and K multiples
// of 8, every other one an odd multiple (sizes no tile divides). The same seed gives the same
// shapes on every rank and every run.
std::vector<RandomShape> draw_shapes(const std::vector<Op>& ops, const ShapeDraw& draw);

}  // namespace tpgemm::bench
