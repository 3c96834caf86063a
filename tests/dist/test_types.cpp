// W = 2 and 4 ranks: output types beyond the input type (fp32 D) and FP8 operands with each scale
// mode, in every implementation that takes them, against an fp32 reference; refused by name by
// every other.

#include <gtest/gtest.h>

#include <functional>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "plan/schedule.h"
#include "testing/testing.h"
#include "dist/ops_cases.h"

namespace tpgemm {
namespace {

using testsupport::check_plan;
using testsupport::describe_check;

// Types beyond the input type (an output type of its own, FP8 operands): for problems made by
// `make` of each op, variant (1: batched, scaled, with C, replayed from a CUDA graph) and shard
// dimension, every implementation that takes them (the baseline and auto always) matches the
// reference, and every other refuses on every rank with a message naming `type` (unless it refuses
// `without_type` of the problem too); then one gemm_ar plan serves calls of fewer rows. Collective.
struct BeyondShapes {  // along N: M and each rank's columns; the fewer rows of those gemm_ar calls
  int64_t m_along_n = 203, n_per_rank = 144;
  std::vector<int64_t> fewer_rows = {37, 1};
};
void check_types_beyond_the_input(const Team& team, const std::function<GemmProblem(Op, int)>& make, const char* type,
                                  uint64_t seed, const BeyondShapes& shapes = {},
                                  const std::function<GemmProblem(GemmProblem)>& without_type = nullptr) {
  const int W = team.world_size();
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int variant : {0, 1})
      for (bool along_n : {false, true}) {
        if (along_n && op == Op::kGemmAr) continue;
        GemmProblem p = make(op, variant);
        if (along_n) p.shard_dim = ShardDim::kN, p.m = shapes.m_along_n, p.n = W * shapes.n_per_rank;
        for (Impl impl : impls_for(op)) {
          PlanOptions o;
          o.impl = impl;
          const Status s = Plan::can_implement(team, p, o);
          if (s.ok()) {
            const auto c = check_plan(team, p, o, 2, seed += 10, /*graph=*/variant == 1);
            RANK_EXPECT(c.ok, "%s", describe_check(p, o, c).c_str());
            // pipelined_ce in pieces too: without C, gemm_rs and gemm_ar pass each block's sum
            // around the ring, every partial a matmul's C (NOTE [partial as C]).
            for (int chunks : {2, 3}) {
              if (impl != Impl::kPipelinedCE || p.has_c) break;
              if (p.scale_mode == ScaleMode::kBlock && !plan::pipelined_pieces_fit(p, W, chunks, 4)) continue;
              o.chunks_per_rank = chunks;
              const auto cc = check_plan(team, p, o, 2, seed += 10);
              RANK_EXPECT(cc.ok, "%s", describe_check(p, o, cc).c_str());
            }
            continue;
          }
          // (an implementation that refuses the problem without the type too may name another reason)
          const bool names = s.message.find(type) != std::string::npos ||
                             (without_type && !Plan::can_implement(team, without_type(p), o).ok());
          RANK_EXPECT(impl != Impl::kBaseline && impl != Impl::kAuto && s.code == ErrorCode::kUnsupported && names,
                      "%s impl=%s: %s", describe(p).c_str(), std::string(to_string(impl)).c_str(), s.message.c_str());
        }
      }
  const GemmProblem ar = make(Op::kGemmAr, 1);
  std::vector<int64_t> ms = {ar.m};
  ms.insert(ms.end(), shapes.fewer_rows.begin(), shapes.fewer_rows.end());
  ms.push_back(ar.m);
  const auto c = testsupport::check_calls_of_m(team, ar, PlanOptions{}, ms, seed += 100);
  RANK_EXPECT(c.ok, "calls of fewer rows: %s", describe_check(ar, PlanOptions{}, c).c_str());
}

// D in fp32 for bf16 and fp16 inputs (GemmProblem::out_dtype), the partials summed in fp32.
TEST_P(Dist, AnFp32OutputMatchesTheReferenceWhereverItIsTaken) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              for (DType dt : {DType::kBF16, DType::kFP16})
                check_types_beyond_the_input(team, [&](Op op, int variant) {
                  GemmProblem p = problem(op, W, dt, variant ? BLayout::kKN : BLayout::kNK, variant);
                  p.out_dtype = DType::kFP32;
                  return p;
                }, "out_dtype", dt == DType::kBF16 ? 5000 : 5500);
            }),
            0);
}

// FP8 (e4m3) A and B with each rank's own scales (ag_gemm gathers them with the shards), D in
// bf16, fp16 or fp32, against the fp32 reference of the dequantised operands, in every
// implementation that takes them (gemm_rs and gemm_ar into a 16-bit D: the pipelined and
// symmetric-collective ones too).
TEST_P(Dist, Fp8OperandsWithTheirScalesMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 6000;
              for (DType out : {DType::kBF16, DType::kFP16, DType::kFP32})
                check_types_beyond_the_input(team, [&](Op op, int variant) {
                  GemmProblem p = problem(op, W, DType::kE4M3, BLayout::kNK, variant);
                  p.n = 144, p.k = 208;  // (FP8 rows of B and D: multiples of 16)
                  p.out_dtype = out;
                  return p;
                }, "e4m3", seed += 500);
            }),
            0);
}

// e5m2, the gradient's FP8 type, beside e4m3 on the other operand (an e5m2 x e5m2 matmul does not
// exist): the same implementations as e4m3, each rank's scales its own.
TEST_P(Dist, Fp8E5m2BesideE4m3MatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 6300;
              for (const auto [a, b] : {std::pair{DType::kE5M2, DType::kE4M3}, std::pair{DType::kE4M3, DType::kE5M2}})
                check_types_beyond_the_input(team, [&](Op op, int variant) {
                  GemmProblem p = problem(op, W, a, BLayout::kNK, variant);
                  p.b_dtype = b;
                  p.n = 144, p.k = 208;  // (FP8 rows of B and D: multiples of 16)
                  p.out_dtype = DType::kBF16;
                  return p;
                }, a == DType::kE5M2 ? "dtype=e5m2" : "dtype=e4m3", seed += 500);
            }),
            0);
}

// The problem with one FP8 scale per tensor instead of its own mode.
GemmProblem tensor_scaled(GemmProblem p) {
  p.scale_mode = ScaleMode::kTensor;
  return p;
}

// FP8 with row-wise scales (ScaleMode::kRow): one per row of each rank's A and per column of D
// from its B, gathered with the rows (columns, along N) by ag_gemm; the baseline, the
// matmul-then-collective implementations and pipelined_ce along M run them (in 1 to 3 chunks: 100
// rows per rank block, so chunks that start off 16-byte aligned scales), and every other
// implementation refuses, naming the mode where it takes tensor-wise scales.
TEST_P(Dist, Fp8RowWiseScalesMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 6500;
              for (DType out : {DType::kBF16, DType::kFP32})
                check_types_beyond_the_input(team, [&](Op op, int variant) {
                  GemmProblem p = problem(op, W, DType::kE4M3, BLayout::kNK, variant);
                  p.n = 144, p.k = 208;  // (FP8 rows of B and D: multiples of 16)
                  p.l = 1;               // (row-wise scales: one batch entry)
                  p.out_dtype = out;
                  p.scale_mode = ScaleMode::kRow;
                  return p;
                }, "scale_mode=row", seed += 500, BeyondShapes{}, tensor_scaled);
            }),
            0);
}

// FP8 with block scales (ScaleMode::kBlock, DeepSeek-V3's): one per 1 x 128 block of each rank's A
// and 128 x 128 block of its B. ag_gemm gathers A's with the rows (M/W = 100 rows per rank: the
// repack moves blocks that are not 16-byte multiples), along N B's with its 128 columns per rank;
// three blocks of K, so B's rows of scales are padded to four (the padding NaN: never read); N = 144
// ends in a partial block of B's rows; M a multiple of 4, calls too. The baseline, the
// matmul-then-collective implementations and pipelined_ce along M (in chunks of multiples of 4
// rows) run them, and every other implementation refuses, naming the mode where it takes
// tensor-wise scales.
TEST_P(Dist, Fp8BlockScalesMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 6700;
              for (DType out : {DType::kBF16, DType::kFP32})
                check_types_beyond_the_input(team, [&](Op op, int variant) {
                  GemmProblem p = problem(op, W, DType::kE4M3, BLayout::kNK, variant);
                  p.m = 100 * W + (op == Op::kGemmAr ? 4 : 0);  // (a multiple of 4)
                  p.n = 144, p.k = 384;  // (whole 128-column blocks of K)
                  p.l = 1;               // (block scales: one batch entry)
                  p.out_dtype = out;
                  p.scale_mode = ScaleMode::kBlock;
                  return p;
                }, "scale_mode=block", seed += 500, BeyondShapes{204, 128, {36, 4}}, tensor_scaled);
              // pipelined_ce in chunks of multiples of 4 rows (32 and 64 per rank block; gemm_ar with
              // C in rounds, without it the ring of partials as C), ag_gemm's chunks' scales pushed
              // with their rows; a chunk off a multiple of 4 rows refused on every rank.
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (bool with_c : {false, true})
                  for (int chunks : {2, 4, 3}) {
                    GemmProblem p = problem(op, W, DType::kE4M3, BLayout::kNK, 0);
                    p.m = 128 * int64_t(W), p.n = 144, p.k = 384;
                    p.out_dtype = DType::kBF16;
                    p.scale_mode = ScaleMode::kBlock;
                    if (with_c) p.alpha = 0.5f, p.beta = -1.25f, p.has_c = true;
                    PlanOptions o;
                    o.impl = Impl::kPipelinedCE;
                    o.chunks_per_rank = chunks;
                    const auto c = check_plan(team, p, o, 2, seed += 10);
                    if (chunks == 3) {
                      RANK_EXPECT(c.status.code == ErrorCode::kUnsupported &&
                                      c.status.message.find("multiples of 4 rows") != std::string::npos,
                                  "%s", describe_check(p, o, c).c_str());
                      continue;
                    }
                    RANK_EXPECT(c.ok, "%s", describe_check(p, o, c).c_str());
                  }
            }),
            0);
}

}  // namespace
}  // namespace tpgemm
