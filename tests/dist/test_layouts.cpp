// A stored [K, M] (a_layout=km) and A and B with row strides (lda, ldb): the baseline, pipelined_ce
// along M, the matmul-then-collective implementations and
// auto (which routes to one of them) give D as the reference of the same values packed, on every
// op and shard dimension; every other implementation refuses naming the packed layouts it takes;
// and a gemm_ar plan with a strided A serves calls of fewer rows. Likewise C and D with row
// strides (the baseline, pipelined_ce along M and auto), and batches of strided entries.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/format.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "plan/problem.h"
#include "tpgemm/plan.h"

namespace tpgemm {
namespace {

using testsupport::check_plan;
using testsupport::describe_check;

class Layouts : public ::testing::TestWithParam<int> {};

std::vector<Impl> every_impl() {
  return {Impl::kBaseline, Impl::kPipelinedCE, Impl::kGemmOneShot, Impl::kGemmTwoShot, Impl::kFused,
          Impl::kGemmReduceScatter, Impl::kAllGatherGemm, Impl::kAuto};
}

// Whether `impl`, where it serves the problem packed, takes p's layouts: the baseline, auto,
// pipelined_ce along M (which gathers ag_gemm's A as it is stored), and the matmul-then-collective
// ones (gemm_reducescatter, gemm_oneshot, gemm_twoshot), which read A and B in place and write D
// packed.
bool takes_layouts(const GemmProblem& p, int world, Impl impl) {
  if (impl == Impl::kBaseline || impl == Impl::kAuto) return true;
  if (impl == Impl::kPipelinedCE) return p.shard_dim == ShardDim::kM;
  const bool matmul_first = impl == Impl::kGemmReduceScatter || impl == Impl::kGemmOneShot || impl == Impl::kGemmTwoShot;
  return matmul_first && plan::packed_output(p, world);
}

// The implementations that serve `twin` (p in the layouts every implementation takes) and
// `takes` p match the reference (auto running one of them; pipelined_ce in one to three chunks,
// without C the ring of partials as C); every other refuses, naming `word` where it serves the
// twin.
void expect_takers_match_and_others_refuse(const Team& team, const GemmProblem& p, const GemmProblem& twin,
                                           const std::function<bool(Impl)>& takes, const char* word, uint64_t& seed,
                                           bool graph) {
  for (Impl impl : every_impl()) {
    PlanOptions o;
    o.impl = impl;
    const bool serves_twin = Plan::can_implement(team, twin, o).ok();
    if (serves_twin && takes(impl)) {
      for (int chunks : {0, 2, 3}) {
        if (chunks > 0 && impl != Impl::kPipelinedCE) break;
        o.chunks_per_rank = chunks;
        const auto c = check_plan(team, p, o, 2, seed += 10, graph && chunks == 0);
        RANK_EXPECT(c.ok && takes(c.ran) && c.ran != Impl::kAuto, "%s", describe_check(p, o, c).c_str());
      }
      continue;
    }
    const Status s = Plan::can_implement(team, p, o);
    RANK_EXPECT(s.code == ErrorCode::kUnsupported && (!serves_twin || s.message.find(word) != std::string::npos),
                "%s impl=%s: %s", describe(p).c_str(), std::string(to_string(impl)).c_str(), s.message.c_str());
  }
}

// Strides and a transposed A: the twin is p packed, the takers those of takes_layouts.
void expect_the_strided_implementations(const Team& team, const GemmProblem& p, const char* word, uint64_t& seed,
                                        bool graph) {
  const int W = team.world_size();
  GemmProblem packed = p;
  packed.a_layout = ALayout::kMK;
  packed.lda = packed.ldb = packed.ldc = packed.ldd = 0;
  packed.batch_stride_a = packed.batch_stride_b = packed.batch_stride_c = packed.batch_stride_d = 0;
  expect_takers_match_and_others_refuse(team, p, packed, [&](Impl impl) { return takes_layouts(p, W, impl); }, word,
                                        seed, graph);
}

TEST_P(Layouts, TransposedAAndStridesMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 7000;
              struct Layout { ALayout a; int64_t lda_extra; BLayout b; int64_t ldb_extra; };
              // (extra: the stride beyond the row; 0 packed)
              const Layout layouts[] = {{ALayout::kKM, 0, BLayout::kNK, 0},  {ALayout::kMK, 16, BLayout::kNK, 0},
                                        {ALayout::kKM, 24, BLayout::kKN, 0}, {ALayout::kMK, 0, BLayout::kNK, 8},
                                        {ALayout::kMK, 0, BLayout::kKN, 16}};
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (bool along_n : {false, true})
                  for (const Layout& l : layouts)
                    for (bool with_c : {false, true}) {
                      if (along_n && op == Op::kGemmAr) continue;
                      GemmProblem p;
                      p.op = op;
                      p.m = 64 * W;  // (a packed [K, M] A: 16-byte rows on every rank)
                      p.n = along_n ? 24 * W : 136;
                      p.k = 200;
                      p.shard_dim = along_n ? ShardDim::kN : ShardDim::kM;
                      p.a_layout = l.a;
                      p.b_layout = l.b;
                      p.lda = l.lda_extra > 0 ? plan::a_stored_row(p, W) + l.lda_extra : 0;
                      p.ldb = l.ldb_extra > 0 ? plan::b_stored_row(p, W) + l.ldb_extra : 0;
                      if (with_c) p.alpha = 0.5f, p.beta = -1.25f, p.has_c = true;
                      expect_the_strided_implementations(team, p, "packed", seed, /*graph=*/with_c);
                    }
              // Plans of A stored [K, M], calls of fewer rows: packed (the stride follows each call's
              // rows) for every op, and at a stride for gemm_ar from one row up.
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (int64_t lda : {int64_t(0), int64_t(520)}) {
                  if (lda != 0 && op != Op::kGemmAr) continue;
                  GemmProblem p;
                  p.op = op;
                  p.m = 64 * W;
                  p.n = 136;
                  p.k = 200;
                  p.a_layout = ALayout::kKM;
                  p.lda = lda;
                  const std::vector<int64_t> ms = lda != 0 ? std::vector<int64_t>{p.m, 37, 1, p.m}
                                                           : std::vector<int64_t>{p.m, 8 * int64_t(W), 16 * int64_t(W)};
                  const auto c = testsupport::check_calls_of_m(team, p, PlanOptions{}, ms, seed += 100);
                  RANK_EXPECT(c.ok, "calls of fewer rows: %s", describe_check(p, PlanOptions{}, c).c_str());
                }
              // Batch entries of A stored [K, M] whose rank blocks of M/W columns are not 16 bytes
              // wide: gemm_rs's block-by-block matmuls start a block at an unaligned column.
              if (24 % W == 0 && 24 / W % 8 != 0) {
                GemmProblem p;
                p.op = Op::kGemmRs;
                p.m = 24, p.n = 136, p.k = 200, p.l = 2;
                p.a_layout = ALayout::kKM;
                expect_the_strided_implementations(team, p, "packed", seed, /*graph=*/false);
              }
            }),
            0);
}

// C and D with row strides (ldc, ldd: a slice of a wider tensor), poison between the rows: the
// baseline, pipelined_ce along M and auto give D as the reference and leave what lies between D's
// rows untouched, on every op and shard dimension, with and without C, in an fp32 D too; every
// other implementation refuses naming the packed D it writes. An ag_gemm C == D in place needs
// ldc == ldd.
TEST_P(Layouts, StridedCAndDMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 7500;
              struct Strides { int64_t ldc_extra, ldd_extra; };
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (bool along_n : {false, true})
                  for (Strides x : {Strides{0, 8}, Strides{24, 0}, Strides{16, 40}})
                    for (bool with_c : {false, true})
                      for (DType out : {DType::kBF16, DType::kFP32}) {
                        if (along_n && op == Op::kGemmAr) continue;
                        if (!with_c && x.ldd_extra == 0) continue;  // (ldc alone: nothing strided is used)
                        GemmProblem p;
                        p.op = op;
                        p.m = 16 * W;
                        p.n = along_n ? 24 * W : 136;
                        p.k = 200;
                        p.shard_dim = along_n ? ShardDim::kN : ShardDim::kM;
                        p.out_dtype = out;
                        const int64_t cols = plan::d_cols(p, W);
                        p.ldc = x.ldc_extra > 0 ? cols + x.ldc_extra : 0;
                        p.ldd = x.ldd_extra > 0 ? cols + x.ldd_extra : 0;
                        if (with_c) p.alpha = 0.5f, p.beta = -1.25f, p.has_c = true;
                        expect_the_strided_implementations(team, p, "ldd", seed, /*graph=*/with_c);
                      }
              // A gemm_ar plan with a strided D serves calls of fewer rows, from one up.
              GemmProblem ar;
              ar.op = Op::kGemmAr;
              ar.m = 64 * W;
              ar.n = 136;
              ar.k = 200;
              ar.ldd = 200;
              const auto c = testsupport::check_calls_of_m(team, ar, PlanOptions{}, {ar.m, 37, 1, ar.m}, seed += 100);
              RANK_EXPECT(c.ok, "calls of fewer rows: %s", describe_check(ar, PlanOptions{}, c).c_str());
            }),
            0);
}

// Batches of strided entries (GemmProblem::batch_stride_a..d, beside row strides or alone; poison
// between the entries): the implementations that take row strides give D as the reference and
// leave what lies between D's entries untouched, on every op and shard dimension, with and
// without C; the others refuse naming the packed layouts they take; a gemm_ar plan with strided
// entries serves calls of fewer rows, its given strides fixed, its default ones following the call.
TEST_P(Layouts, BatchStridesMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 7900;
              struct Strides { int64_t row_pad, batch_pad; bool operands; };  // (pads in elements)
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (bool along_n : {false, true})
                  for (Strides x : {Strides{0, 24, true}, Strides{16, 8, true}, Strides{0, 40, false},
                                    Strides{8, 16, false}})
                    for (bool with_c : {false, true}) {
                      if (along_n && op == Op::kGemmAr) continue;
                      GemmProblem p;
                      p.op = op;
                      p.m = 16 * W;
                      p.n = along_n ? 24 * W : 136;
                      p.k = 200;
                      p.l = 3;
                      p.shard_dim = along_n ? ShardDim::kN : ShardDim::kM;
                      if (with_c) p.alpha = 0.5f, p.beta = -1.25f, p.has_c = true;
                      if (x.operands) {
                        if (x.row_pad > 0) p.lda = p.k + x.row_pad, p.ldb = p.k + x.row_pad;
                        p.batch_stride_a = plan::a_batch_stride(p, W) + x.batch_pad;
                        p.batch_stride_b = plan::b_batch_stride(p, W) + x.batch_pad;
                      } else {
                        if (x.row_pad > 0) p.ldd = p.ldc = plan::d_cols(p, W) + x.row_pad;
                        p.batch_stride_d = plan::d_batch_stride(p, W) + x.batch_pad;
                        if (with_c) p.batch_stride_c = plan::c_batch_stride(p, W) + 2 * x.batch_pad;
                      }
                      expect_the_strided_implementations(team, p, "batch_stride", seed, /*graph=*/with_c);
                    }
              GemmProblem ar;
              ar.op = Op::kGemmAr;
              ar.m = 64 * W;
              ar.n = 136;
              ar.k = 200;
              ar.l = 2;
              ar.lda = 208;
              ar.ldd = 200;
              ar.batch_stride_d = ar.m * 200 + 64;  // (A's: rows x lda, following the call)
              const auto c = testsupport::check_calls_of_m(team, ar, PlanOptions{}, {ar.m, 37, 1, ar.m}, seed += 100);
              RANK_EXPECT(c.ok, "calls of fewer rows: %s", describe_check(ar, PlanOptions{}, c).c_str());
              // D's packed batch stride at the plan's M, given: calls of fewer rows keep it (their
              // entries no longer packed), run by the implementation made for a range up to M.
              GemmProblem kept = ar;
              kept.lda = kept.ldd = 0;
              kept.batch_stride_d = kept.m * kept.n;
              const auto k = testsupport::check_calls_of_m(team, kept, PlanOptions{}, {kept.m, kept.m - 8, 1}, seed += 100);
              RANK_EXPECT(k.ok, "calls of fewer rows: %s", describe_check(kept, PlanOptions{}, k).c_str());
            }),
            0);
}

// A batch sharing one B (GemmProblem::b_broadcast: B's batch stride 0, B of one entry): every
// implementation that takes it (the baseline, pipelined_ce in 1 to 3 chunks, the
// matmul-then-collective ones, auto) matches the reference of B copied into every entry, on each
// op, B layout, with and without C (C from a CUDA graph); the others refuse naming it, and along N
// every implementation does.
TEST_P(Layouts, BatchesSharingOneBMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 7800;
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (BLayout layout : {BLayout::kNK, BLayout::kKN})
                  for (bool with_c : {false, true}) {
                    GemmProblem p;
                    p.op = op;
                    p.m = 64 * W + (op == Op::kGemmAr ? W - 1 : 0);
                    p.n = 136;
                    p.k = 200;
                    p.l = 3;
                    p.b_layout = layout;
                    p.b_broadcast = true;
                    if (with_c) p.alpha = 0.5f, p.beta = -1.25f, p.has_c = true;
                    GemmProblem own_bs = p;
                    own_bs.b_broadcast = false;
                    const auto takes = [](Impl impl) {
                      return impl == Impl::kBaseline || impl == Impl::kAuto || impl == Impl::kPipelinedCE ||
                             impl == Impl::kGemmReduceScatter || impl == Impl::kGemmOneShot || impl == Impl::kGemmTwoShot;
                    };
                    expect_takers_match_and_others_refuse(team, p, own_bs, takes, "b_broadcast", seed, with_c);
                  }
              GemmProblem along_n;
              along_n.op = Op::kGemmRs, along_n.shard_dim = ShardDim::kN;
              along_n.m = 64, along_n.n = 24 * W, along_n.k = 200, along_n.l = 3, along_n.b_broadcast = true;
              const Status s = Plan::can_implement(team, along_n, PlanOptions{});
              RANK_EXPECT(s.code == ErrorCode::kUnsupported && s.message.find("b_broadcast") != std::string::npos, "%s",
                          s.message.c_str());
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(W, Layouts, ::testing::Values(2, 4, 8), [](const auto& info) { return strfmt("W%d", info.param); });

}  // namespace
}  // namespace tpgemm
