// The planner's rules (plan/choose.cpp): what auto runs where tuning is off, per shape and team.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plan/choose.h"
#include "plan/problem.h"
#include "plan/schedule.h"
#include "support/host_problems.h"

namespace tpgemm::plan {
namespace {

using testhost::ag;
using testhost::expect_error;

TEST(Choose, BaselineWithoutNvlinkPeersOrAlone) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    GemmProblem p = ag(16384, 8192, 8192);
    p.op = op;
    EXPECT_EQ(choose(p, {4, false}, {}).impl, Impl::kBaseline);
    EXPECT_EQ(choose(p, {1, true}, {}).impl, Impl::kBaseline);
    p.m = 33 * 1024;
    EXPECT_EQ(choose(p, {33, true}, {}).impl, Impl::kBaseline);  // beyond kMaxSymmetricWorld
  }
}

TEST(Choose, HonoursAnExplicitImplAndOptions) {
  GemmProblem p = ag(512, 8192, 8192);
  PlanOptions o;
  o.impl = Impl::kPipelinedCE;
  o.chunks_per_rank = 3;
  o.comm_sms = 0;
  const Choice c = choose(p, {4, true}, o);
  EXPECT_EQ(c.impl, Impl::kPipelinedCE);
  EXPECT_EQ(c.chunks, 3);
  EXPECT_EQ(c.comm_sms, 0);
  // Each fused reduction's own default, measured (NOTE [planner rules]); an explicit one wins.
  o = PlanOptions{};
  o.impl = Impl::kFused;
  p.m = 8192;
  p.op = Op::kGemmRs;
  EXPECT_EQ(choose(p, {4, true}, o).comm_sms, 16);
  p.op = Op::kGemmAr;
  EXPECT_EQ(choose(p, {4, true}, o).comm_sms, 32);
  o.comm_sms = 8;
  EXPECT_EQ(choose(p, {4, true}, o).comm_sms, 8);
}

// allreduce_largest (what an AllReducePlan sizes each algorithm's staging for) is the rule's own
// bound: the largest message the rule gives one-shot or two-shot, none where it gives it nothing.
TEST(Choose, AllReduceLargestIsTheRulesBound) {
  for (const Topology topo : {Topology{2, true}, Topology{3, true}, Topology{4, true}, Topology{8, true},
                              Topology{4, false}, Topology{kMaxSymmetricWorld + 1, true}, Topology{1, true}})
    for (AllReduceImpl algo : {AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot}) {
      const int64_t top = allreduce_largest(algo, topo);
      if (top == 0) {
        for (int64_t bytes : {int64_t(16), int64_t(1) << 20, int64_t(1) << 34})
          EXPECT_NE(choose_allreduce(bytes, topo), algo) << topo.world << " " << bytes;
        continue;
      }
      EXPECT_EQ(choose_allreduce(top, topo), algo) << topo.world;
      EXPECT_NE(choose_allreduce(top + 16, topo), algo) << topo.world;
    }
}

TEST(Choose, AllReduceBySize) {
  EXPECT_EQ(choose_allreduce(4096, {4, true}), AllReduceImpl::kOneShot);
  EXPECT_EQ(choose_allreduce(256 * 1024, {4, true}), AllReduceImpl::kTwoShot);
  EXPECT_EQ(choose_allreduce(256 * 1024, {2, true}), AllReduceImpl::kOneShot);
  EXPECT_EQ(choose_allreduce(1024 * 1024, {2, true}), AllReduceImpl::kOneShot);
  EXPECT_EQ(choose_allreduce(1024 * 1024 + 16, {2, true}), AllReduceImpl::kTwoShot);
  EXPECT_EQ(choose_allreduce(int64_t(16) << 20, {4, true}), AllReduceImpl::kTwoShot);
  EXPECT_EQ(choose_allreduce(4096, {4, false}), AllReduceImpl::kNccl);
  EXPECT_EQ(choose_allreduce(int64_t(64) << 20, {4, true}), AllReduceImpl::kNccl);
  EXPECT_EQ(choose_allreduce(int64_t(256) << 20, {2, true}), AllReduceImpl::kTwoShot);
  EXPECT_EQ(choose_allreduce(int64_t(1) << 30, {2, true}), AllReduceImpl::kNccl);
  // Beyond the symmetric kernels' team size: NCCL, and gemm_ar's symmetric impls refuse.
  EXPECT_EQ(choose_allreduce(4096, {kMaxSymmetricWorld + 1, true}), AllReduceImpl::kNccl);
  // No message size gives a team without the symmetric kernels one of them, not even an empty one.
  for (int64_t bytes : {int64_t(0), int64_t(-16), int64_t(16)}) {
    EXPECT_EQ(choose_allreduce(bytes, {kMaxSymmetricWorld + 1, true}), AllReduceImpl::kNccl) << bytes;
    EXPECT_EQ(choose_allreduce(bytes, {4, false}), AllReduceImpl::kNccl) << bytes;
    EXPECT_EQ(choose_allreduce(bytes, {1, true}), AllReduceImpl::kNccl) << bytes;
  }
  GemmProblem p = ag(16, 8192, 2048);
  p.op = Op::kGemmAr;
  EXPECT_EQ(choose(p, {kMaxSymmetricWorld + 1, true}, {}).impl, Impl::kBaseline);
  const Status s = impl_supported(p, Impl::kGemmTwoShot, {kMaxSymmetricWorld + 1, true});
  EXPECT_EQ(s.code, ErrorCode::kUnsupported);
  EXPECT_NE(s.message.find("up to 32 ranks"), std::string::npos) << s.message;
}

// The measured rules of NOTE [planner rules], on the shared shapes.
TEST(Choose, FusedPullsPiecesOfColumnsOnlyWhenItsTilesAreOneWaveOfTwoRanks) {
  PlanOptions o;
  o.impl = Impl::kFused;
  const Topology nvlink{4, true};
  EXPECT_EQ(choose(ag(512, 8192, 8192), {2, true}, o).chunks, 4);  // 128 tiles: one wave; 4 MiB blocks
  EXPECT_EQ(choose(ag(512, 8192, 8192), nvlink, o).chunks, 1);     // the same at W=4: 2D copies cost more
  EXPECT_EQ(choose(ag(1024, 1024, 1024), {2, true}, o).chunks, 1);  // one wave, but 1 MiB blocks
  EXPECT_EQ(choose(ag(16384, 3584, 8192), nvlink, o).chunks, 1);   // 1792 tiles
  o.chunks_per_rank = 2;
  EXPECT_EQ(choose(ag(16384, 3584, 8192), nvlink, o).chunks, 2);   // asked for
}

// NOTE [partial as C]: by default only gemm_rs on two ranks (measured there), along M, without
// C, from 1024 rows per block.
TEST(Choose, GemmRsOnTwoRanksWithoutCTakesTwoChunks) {
  GemmProblem p = ag(4096, 8192, 2048);
  p.op = Op::kGemmRs;
  PlanOptions o;
  o.impl = Impl::kPipelinedCE;
  EXPECT_EQ(choose(p, {2, true}, o).chunks, 2);
  EXPECT_EQ(choose(p, {2, true}, {}).chunks, 2);  // auto: pipelined_ce there
  EXPECT_EQ(choose(p, {4, true}, o).chunks, 1);
  p.m = 2048;  // 1024 rows per block
  EXPECT_EQ(choose(p, {2, true}, o).chunks, 2);
  p.m = 1024;  // 512 rows per block: one chunk measured faster
  EXPECT_EQ(choose(p, {2, true}, o).chunks, 1);
  p.m = 4096;
  p.has_c = true;
  p.beta = 1.0f;
  EXPECT_EQ(choose(p, {2, true}, o).chunks, 1);
  p.has_c = false;
  p.beta = 0.0f;
  p.shard_dim = ShardDim::kN;
  EXPECT_EQ(choose(p, {2, true}, o).chunks, 1);
}

TEST(Choose, SharedShapesFollowTheMeasurements) {
  struct Case { Op op; int64_t m, n, k; int world; Impl want; int chunks; };
  const Case cases[] = {
      {Op::kAgGemm, 2048, 8192, 8192, 4, Impl::kPipelinedCE, 1},
      {Op::kAgGemm, 2048, 3584, 8192, 4, Impl::kPipelinedCE, 1}, {Op::kAgGemm, 8192, 8192, 8192, 4, Impl::kPipelinedCE, 2},
      {Op::kAgGemm, 16384, 3584, 8192, 4, Impl::kFused, 1},      {Op::kAgGemm, 16384, 3584, 8192, 2, Impl::kPipelinedCE, 2},
      {Op::kAgGemm, 16384, 8192, 8192, 4, Impl::kPipelinedCE, 2}, {Op::kAgGemm, 4096, 8192, 8192, 4, Impl::kPipelinedCE, 1},
      {Op::kGemmRs, 512, 8192, 2048, 4, Impl::kGemmReduceScatter, 1}, {Op::kGemmRs, 512, 8192, 2048, 2, Impl::kGemmReduceScatter, 1},
      {Op::kAgGemm, 512, 8192, 8192, 2, Impl::kAllGatherGemm, 1},     {Op::kAgGemm, 512, 8192, 8192, 4, Impl::kAllGatherGemm, 1},
      {Op::kAgGemm, 256, 8192, 8192, 4, Impl::kAllGatherGemm, 1},     {Op::kAgGemm, 1024, 8192, 8192, 4, Impl::kPipelinedCE, 1},
      {Op::kGemmRs, 128, 8192, 2048, 4, Impl::kGemmReduceScatter, 1}, {Op::kGemmRs, 1024, 8192, 2048, 4, Impl::kPipelinedCE, 1},
      {Op::kGemmRs, 64, 8192, 2048, 4, Impl::kGemmReduceScatter, 1},           {Op::kAgGemm, 128, 8192, 8192, 4, Impl::kAllGatherGemm, 1},
      {Op::kAgGemm, 128, 8192, 8192, 2, Impl::kAllGatherGemm, 1},          {Op::kGemmRs, 64, 8192, 2048, 2, Impl::kGemmReduceScatter, 1},      {Op::kAgGemm, 1024, 8192, 8192, 2, Impl::kPipelinedCE, 1},
      {Op::kGemmRs, 1024, 8192, 2048, 2, Impl::kPipelinedCE, 1}, {Op::kGemmRs, 128, 8192, 2048, 2, Impl::kGemmReduceScatter, 1},
      {Op::kGemmRs, 2048, 8192, 2048, 2, Impl::kPipelinedCE, 2}, {Op::kGemmRs, 2048, 8192, 2048, 4, Impl::kPipelinedCE, 1},
      {Op::kGemmRs, 16384, 8192, 7168, 4, Impl::kPipelinedCE, 1}, {Op::kGemmAr, 16, 8192, 2048, 4, Impl::kGemmOneShot, 1},
      {Op::kGemmAr, 16, 8192, 2048, 2, Impl::kFused, 1},         {Op::kGemmAr, 64, 8192, 2048, 2, Impl::kFused, 1},
      {Op::kGemmAr, 128, 8192, 2048, 2, Impl::kGemmOneShot, 1},  {Op::kGemmAr, 80, 8192, 2048, 2, Impl::kGemmOneShot, 1},
      {Op::kGemmAr, 144, 8192, 2048, 2, Impl::kGemmTwoShot, 1},  {Op::kGemmAr, 256, 8192, 2048, 2, Impl::kGemmTwoShot, 1},
      {Op::kGemmAr, 48, 8192, 2048, 2, Impl::kGemmOneShot, 1},   // three tile rows: not measured; 768 KB
      {Op::kGemmAr, 32, 4096, 2048, 2, Impl::kGemmOneShot, 1},   // 64 tiles: not measured
      {Op::kGemmAr, 32, 8192, 2048, 2, Impl::kFused, 1},         {Op::kGemmAr, 2048, 8192, 2048, 4, Impl::kFused, 1},
      {Op::kGemmAr, 128, 8192, 2048, 4, Impl::kGemmTwoShot, 1},  {Op::kGemmAr, 1024, 8192, 2048, 4, Impl::kBaseline, 1},  {Op::kGemmAr, 1024, 8192, 2048, 2, Impl::kGemmTwoShot, 1},
      {Op::kGemmAr, 4096, 8192, 2048, 4, Impl::kFused, 1},       {Op::kGemmAr, 2048, 8192, 2048, 2, Impl::kFused, 1},
      {Op::kGemmAr, 8192, 8192, 2048, 4, Impl::kFused, 1},       {Op::kGemmAr, 8192, 8192, 2048, 2, Impl::kPipelinedCE, 4},
      {Op::kGemmAr, 16384, 8192, 2048, 2, Impl::kPipelinedCE, 8}, {Op::kGemmAr, 4096, 8192, 2048, 2, Impl::kFused, 1},
      {Op::kGemmAr, 65536, 8192, 2048, 2, Impl::kPipelinedCE, 8},  // chunks of 1024 rows, at most 8
      {Op::kGemmAr, 8200, 8192, 2048, 4, Impl::kFused, 1},  // not whole 128-row tiles per rank: gemm_ar's fused takes any M
  };
  for (const Case& c : cases) {
    GemmProblem p = ag(c.m, c.n, c.k);
    p.op = c.op;
    const Choice got = choose(p, {c.world, true}, {});
    EXPECT_EQ(got.impl, c.want) << describe(p) << " W=" << c.world;
    EXPECT_EQ(got.chunks, c.chunks) << describe(p) << " W=" << c.world;
  }
  // The ring of partials as C has no C: with C, gemm_ar at W=2 keeps fused.
  GemmProblem with_c = ag(8192, 8192, 2048);
  with_c.op = Op::kGemmAr;
  with_c.has_c = true;
  with_c.beta = 1.0f;
  EXPECT_EQ(choose(with_c, {2, true}, {}).impl, Impl::kFused);
  // Nor below N = 8192 (measured there only), nor when the caller asks for one chunk.
  GemmProblem narrow = ag(8192, 4096, 2048);
  narrow.op = Op::kGemmAr;
  EXPECT_EQ(choose(narrow, {2, true}, {}).impl, Impl::kFused);
  PlanOptions one;
  one.chunks_per_rank = 1;
  narrow.n = 8192;
  EXPECT_EQ(choose(narrow, {2, true}, one).impl, Impl::kFused);
  EXPECT_EQ(choose(narrow, {2, true}, {}).impl, Impl::kPipelinedCE);
  // Where D is large enough for fused but M is decode-sized, auto does not take the decode kernel.
  GemmProblem small_m = ag(256, 16384, 2048);
  small_m.op = Op::kGemmAr;
  small_m.l = 4;  // 8 MiB of D per rank at W=4
  EXPECT_EQ(choose(small_m, {4, true}, {}).impl, Impl::kPipelinedCE);
  small_m.l = 2;
  small_m.n = 32768;  // 16 MiB per rank at W=2, and 256 rows are whole tiles there
  EXPECT_EQ(choose(small_m, {2, true}, {}).impl, Impl::kFused);
  // Without Hopper GPUs the decode kernel's pick falls back to the matmul then the all-reduce,
  GemmProblem decode = ag(16, 8192, 2048);
  decode.op = Op::kGemmAr;
  EXPECT_EQ(choose(decode, {2, true, /*all_sm90=*/false}, {}).impl, Impl::kGemmOneShot);
  // and the other fused picks to pipelined_ce.
  for (Op op : {Op::kAgGemm, Op::kGemmAr}) {
    GemmProblem p = ag(op == Op::kAgGemm ? 16384 : 8192, op == Op::kAgGemm ? 3584 : 8192, op == Op::kAgGemm ? 8192 : 2048);
    p.op = op;
    EXPECT_EQ(choose(p, {4, true}, {}).impl, Impl::kFused) << describe(p);
    EXPECT_EQ(choose(p, {4, true, /*all_sm90=*/false}, {}).impl, Impl::kPipelinedCE) << describe(p);
  }
}

}  // namespace
}  // namespace tpgemm::plan
