// The measured planner's host pieces: its candidates, the tuning cache (never trusted blindly),
// the ranges of per-call M, and the random shape draw (pure host logic).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>

#include "bench/random_shapes.h"
#include "core/format.h"
#include "gemm/sm90_config.h"
#include "plan/choose.h"
#include "plan/problem.h"
#include "plan/tune_cache.h"

namespace tpgemm::plan {
namespace {

GemmProblem problem(Op op, int64_t m, int64_t n, int64_t k) {
  GemmProblem p;
  p.op = op;
  p.m = m, p.n = n, p.k = k;
  return p;
}

TEST(Candidates, StartWithTheBaselineAndServeTheProblem) {
  const Topology topo{4, true};
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int64_t m : {4, 512, 4096, 16384}) {
      const GemmProblem p = problem(op, m, 8192, 2048);
      const std::vector<Choice> all = candidates(p, topo, {}, /*any_m=*/false);
      ASSERT_FALSE(all.empty());
      EXPECT_EQ(all[0].impl, Impl::kBaseline);
      std::set<std::tuple<int, int, int, int>> seen;
      for (const Choice& c : all) {
        EXPECT_TRUE(impl_supported(p, c.impl, topo).ok()) << to_string(c.impl);
        EXPECT_NE(c.impl, Impl::kNaiveRemote);
        EXPECT_NE(c.impl, Impl::kThreadloadGather);
        EXPECT_NE(c.impl, Impl::kGatherThenGemm);
        EXPECT_TRUE(seen.insert({static_cast<int>(c.impl), c.chunks, c.comm_sms, static_cast<int>(c.matmul)}).second)
            << "a candidate twice";
        EXPECT_EQ(c.impl == Impl::kPipelinedCE, c.matmul != Matmul::kAuto) << to_string(c.impl);
      }
      for (const Choice& c : candidates(p, topo, {}, /*any_m=*/true))
        EXPECT_TRUE(takes_any_m(p, c.impl, c.matmul)) << to_string(c.impl);
    }
  // The overlapped implementations where they apply, with more than one chunk count.
  const std::vector<Choice> big = candidates(problem(Op::kAgGemm, 16384, 8192, 8192), topo, {}, false);
  int pipelined = 0, fused = 0, core = 0;
  for (const Choice& c : big)
    pipelined += c.impl == Impl::kPipelinedCE, fused += c.impl == Impl::kFused, core += c.matmul == Matmul::kSm90;
  EXPECT_GE(pipelined, 3);
  EXPECT_GE(fused, 1);
  EXPECT_EQ(core * 2, pipelined) << "pipelined_ce's matmuls both ways at every chunk count";
}

// pipelined_ce's matmuls on the Hopper core only where it serves the problem, and only the
// matmuls the caller asked for.
TEST(Candidates, TheHopperCoreOnlyWhereItServes) {
  const auto cores = [](const GemmProblem& p, const Topology& topo, Matmul asked) {
    std::set<Matmul> out;
    PlanOptions o;
    o.matmul = asked;
    for (const Choice& c : candidates(p, topo, o, false))
      if (c.impl == Impl::kPipelinedCE) out.insert(c.matmul);
    return out;
  };
  const Topology topo{2, true};
  const GemmProblem p = problem(Op::kGemmRs, 8192, 8192, 2048);
  EXPECT_EQ(cores(p, topo, Matmul::kAuto), (std::set<Matmul>{Matmul::kCublasLt, Matmul::kSm90}));
  EXPECT_EQ(cores(p, topo, Matmul::kCublasLt), std::set<Matmul>{Matmul::kCublasLt});
  EXPECT_EQ(cores(p, topo, Matmul::kSm90), std::set<Matmul>{Matmul::kSm90});
  Topology older = topo;
  older.all_sm90 = false;
  EXPECT_EQ(cores(p, older, Matmul::kAuto), std::set<Matmul>{Matmul::kCublasLt});
  GemmProblem fp8 = p;
  fp8.dtype = DType::kE4M3;
  fp8.out_dtype = DType::kBF16;
  EXPECT_EQ(cores(fp8, topo, Matmul::kAuto), std::set<Matmul>{Matmul::kCublasLt});
  GemmProblem km = p;
  km.a_layout = ALayout::kKM;
  EXPECT_EQ(cores(km, topo, Matmul::kAuto), std::set<Matmul>{Matmul::kCublasLt});
  GemmProblem along_n = problem(Op::kAgGemm, 8192, 8192, 2048);
  along_n.shard_dim = ShardDim::kN;
  EXPECT_FALSE(pipelined_core_possible(along_n, topo));
  EXPECT_FALSE(cores(along_n, topo, Matmul::kAuto).count(Matmul::kSm90));
  // The rules never take it: the core is chosen only where it was timed faster.
  PlanOptions rules;
  rules.impl = Impl::kPipelinedCE;
  EXPECT_EQ(choose(p, topo, rules).matmul, Matmul::kCublasLt);
  rules.matmul = Matmul::kSm90;
  EXPECT_EQ(choose(p, topo, rules).matmul, Matmul::kSm90);
}

// The fused reductions' tile path is timed only where its tiles outlast a wave on the team's SMs
// (the decode kernel and the fused AllGather+GEMM whatever their size).
TEST(Candidates, TheFusedTilePathOnlyBeyondOneWave) {
  const auto has_fused = [](const GemmProblem& p, const Topology& topo) {
    for (const Choice& c : candidates(p, topo, {}, false))
      if (c.impl == Impl::kFused) return true;
    return false;
  };
  const Topology topo{2, true};  // 132 SMs
  for (Op op : {Op::kGemmRs, Op::kGemmAr}) {
    // 4 x 32 = 128 tiles of 128 x 256: one wave; 8 x 32 = 256 (M = 1024): more.
    EXPECT_FALSE(has_fused(problem(op, 512, 8192, 2048), topo)) << to_string(op);
    EXPECT_TRUE(gemm::sm90::fused_tiles_one_wave(512, 8192, 1, topo.num_sms));
    EXPECT_TRUE(has_fused(problem(op, 1024, 8192, 2048), topo)) << to_string(op);
    Topology small = topo;
    small.num_sms = 100;  // the same 128 tiles outlast a wave of a smaller GPU
    EXPECT_TRUE(has_fused(problem(op, 512, 8192, 2048), small)) << to_string(op);
    GemmProblem batched = problem(op, 512, 8192, 2048);
    batched.l = 2;  // batches count
    EXPECT_FALSE(gemm::sm90::fused_tiles_one_wave(batched.m, batched.n, batched.l, topo.num_sms));
  }
  EXPECT_TRUE(has_fused(problem(Op::kGemmAr, 16, 8192, 2048), topo));   // the decode kernel
  EXPECT_TRUE(has_fused(problem(Op::kAgGemm, 512, 8192, 2048), topo));  // the fused AllGather+GEMM
  EXPECT_FALSE(has_fused(problem(Op::kGemmAr, 201, 4096, 4096), topo)); // 2 x 16 tiles, no decode kernel
}

// The tuner's pick: the fastest, an earlier candidate keeping a tie within 1% and the baseline
// within 2%; failed candidates (< 0) never win.
TEST(Fastest, KeepsTiesWithEarlierCandidatesAndTheBaselineLonger) {
  const std::vector<Choice> c = {{Impl::kBaseline, 1, 2}, {Impl::kAllGatherGemm, 1, 2}, {Impl::kPipelinedCE, 2, 2},
                                 {Impl::kFused, 1, 2}};
  EXPECT_EQ(fastest(c, {1.00, 0.985, 0.99, 0.995}), 0);   // 1.5% faster: the baseline stays
  EXPECT_EQ(fastest(c, {1.00, 0.975, 0.99, 0.995}), 1);   // 2.5% faster: it leaves
  EXPECT_EQ(fastest(c, {1.00, 0.975, 0.970, 0.99}), 1);   // then 1% between the others: the earlier stays
  EXPECT_EQ(fastest(c, {1.00, 0.975, 0.960, 0.99}), 2);
  EXPECT_EQ(fastest(c, {-1, 0.975, -1, 0.99}), 1);        // failed ones are skipped; no baseline: 1%
  EXPECT_EQ(fastest(c, {-1, 1.0, -1, 0.985}), 3);
  EXPECT_EQ(fastest(c, {-1, -1, -1, -1}), -1);
}

// The runoff's field: fastest()'s pick (the baseline, say, while others are up to 2% quicker) and
// the quickest others within 3% of its time, three in all, in the candidates' order.
TEST(NearTies, AreTheQuickestWithinTheMarginInCandidateOrder) {
  const std::vector<Choice> c = {{Impl::kBaseline, 1, 2}, {Impl::kAllGatherGemm, 1, 2}, {Impl::kPipelinedCE, 2, 2},
                                 {Impl::kPipelinedCE, 4, 2}, {Impl::kFused, 1, 2}};
  EXPECT_EQ(near_ties(c, {1.00, 1.50, 1.20, 1.10, 1.031}, 1.03, 3), (std::vector<size_t>{}));  // the baseline alone
  EXPECT_EQ(near_ties(c, {1.00, 0.99, 1.20, 1.02, 1.10}, 1.03, 3), (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(near_ties(c, {1.00, 0.50, 0.51, 0.505, 0.515}, 1.03, 3), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(near_ties(c, {-1, 0.50, -1, 0.505, 0.515}, 1.03, 2), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(near_ties(c, {-1, -1, -1, -1, -1}, 1.03, 3), (std::vector<size_t>{}));
  // The baseline picked, three quicker within its 2%: it stays in the field
  EXPECT_EQ(near_ties(c, {1.00, 0.985, 0.99, 0.995, 0.99}, 1.03, 3), (std::vector<size_t>{0, 1, 2}));
  // The pick is 1 (2 is within its 1%); the baseline is 3.1% above it, outside
  EXPECT_EQ(near_ties(c, {1.00, 0.97, 0.965, 1.2, 1.2}, 1.03, 3), (std::vector<size_t>{1, 2}));
}

TEST(Candidates, KeepTheKnobsTheCallerFixed) {
  PlanOptions o;
  o.chunks_per_rank = 3;
  for (const Choice& c : candidates(problem(Op::kAgGemm, 8192, 8192, 8192), {2, true}, o, false)) {
    if (c.impl == Impl::kPipelinedCE || c.impl == Impl::kFused) {
      EXPECT_EQ(c.chunks, 3);
    }
  }
}

// On one GPU the implementations differ too (measured on an H100: ag_gemm 4096^3 ran the baseline
// in 0.199 ms, pipelined_ce in 0.177): the tuner times them there as well.
TEST(Candidates, ATeamOfOneHasThemAll) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    const std::vector<Choice> c = candidates(problem(op, 8192, 8192, 8192), {1, true}, {}, false);
    ASSERT_GT(c.size(), 2u) << to_string(op);
    EXPECT_EQ(c[0].impl, Impl::kBaseline);
  }
}

TEST(Candidates, OnlyTheBaselineWithoutNvlinkPeers) {
  const std::vector<Choice> c = candidates(problem(Op::kGemmRs, 8192, 8192, 8192), {4, false}, {}, false);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].impl, Impl::kBaseline);
}

// PlanOptions::deterministic: no sum in NCCL. The reducing ops lose the baseline from the
// candidates and from the rules' choice (for every shape, any M too), ag_gemm keeps it, one rank
// keeps it (nothing is summed), and without NVLink peers nothing with a fixed order is left.
TEST(Candidates, DeterministicLeavesNoSumToNccl) {
  PlanOptions o;
  o.deterministic = true;
  const Topology topo{4, true};
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int64_t m : {4, 512, 4096, 16384})
      for (bool any_m : {false, true}) {
        const GemmProblem p = problem(op, m, 8192, 2048);
        const std::vector<Choice> all = candidates(p, topo, o, any_m);
        ASSERT_FALSE(all.empty()) << describe(p);
        for (const Choice& c : all) EXPECT_TRUE(fixed_reduction_order(p, c.impl, 4)) << describe(p) << " " << to_string(c.impl);
        const Choice rules = any_m ? choose_any_m(p, topo, o) : choose(p, topo, o);
        EXPECT_TRUE(fixed_reduction_order(p, rules.impl, 4)) << describe(p) << " " << to_string(rules.impl);
        if (any_m) {
          EXPECT_TRUE(takes_any_m(p, rules.impl, rules.matmul)) << describe(p) << " " << to_string(rules.impl);
        }
        if (op == Op::kAgGemm) {
          EXPECT_EQ(all[0].impl, Impl::kBaseline);
        }
      }
  const GemmProblem rs = problem(Op::kGemmRs, 8192, 8192, 8192);
  EXPECT_TRUE(fixed_reduction_order(rs, Impl::kBaseline, 1));
  EXPECT_TRUE(candidates(rs, {4, false}, o, false).empty());
  const Status refused = deterministic_supported(rs, Impl::kBaseline, 4);
  EXPECT_EQ(refused.code, ErrorCode::kUnsupported);
  EXPECT_NE(refused.message.find("deterministic=true with impl=baseline"), std::string::npos) << refused.message;
  EXPECT_TRUE(deterministic_supported(problem(Op::kAgGemm, 64, 64, 64), Impl::kBaseline, 4).ok());
}

// An output type of its own: the baseline, and pipelined_ce's ag_gemm (its matmuls alone write D).
TEST(Candidates, AnOutputTypeOfItsOwnKeepsThoseThatTakeIt) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    GemmProblem p = problem(op, 16384, 8192, 8192);
    p.out_dtype = DType::kFP32;
    for (bool any_m : {false, true}) {
      const std::vector<Choice> all = candidates(p, Topology{4, true}, {}, any_m);
      ASSERT_FALSE(all.empty()) << describe(p);
      EXPECT_EQ(all[0].impl, Impl::kBaseline);
      for (const Choice& c : all) {
        EXPECT_TRUE(c.impl == Impl::kBaseline || (op == Op::kAgGemm && c.impl == Impl::kPipelinedCE))
            << describe(p) << " " << to_string(c.impl);
      }
    }
  }
}

// e4m3 operands: ag_gemm's gather carries every rank's scale, the baseline's and pipelined_ce's;
// gemm_rs and gemm_ar into a 16-bit D time their pipelined and symmetric-collective ones too.
TEST(Candidates, Fp8OperandsKeepThoseThatTakeThem) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    GemmProblem p = problem(op, 16384, 8192, 8192);
    p.dtype = DType::kE4M3;
    p.out_dtype = DType::kBF16;
    const std::vector<Choice> all = candidates(p, Topology{4, true}, {}, false);
    bool pipelined = false;
    for (const Choice& c : all) {
      EXPECT_TRUE(impl_supported(p, c.impl, {4, true}).ok()) << describe(p) << " " << to_string(c.impl);
      pipelined = pipelined || c.impl == Impl::kPipelinedCE;
    }
    EXPECT_TRUE(pipelined) << describe(p);
  }
}

TEST(Candidates, ReturningTheGatheredAKeepsThoseThatCan) {
  PlanOptions o;
  o.return_gathered_a = true;
  for (const Choice& c : candidates(problem(Op::kAgGemm, 8192, 8192, 8192), {4, true}, o, false))
    EXPECT_TRUE(gathered_a_supported(problem(Op::kAgGemm, 8192, 8192, 8192), c.impl).ok()) << to_string(c.impl);
}

TEST(ChooseAnyM, PicksAnImplementationThatTakesAnyM) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int w : {2, 4, 8})
      for (int64_t m : {int64_t(w), int64_t(1024), int64_t(16384)}) {
        const GemmProblem p = problem(op, m, 8192, 4096);
        const Choice c = choose_any_m(p, {w, true}, {});
        EXPECT_TRUE(takes_any_m(p, c.impl, c.matmul)) << describe(p) << " " << to_string(c.impl);
      }
}

// NOTE [pipelined calls of fewer rows]: a range of M times pipelined_ce on cuBLASLt's matmuls,
// never on the Hopper core's (measured per shape) nor fused (made for one M), nor on FP8 operands.
TEST(Candidates, ARangeOfMTimesPipelinedOnCublasLtOnly) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    const GemmProblem p = problem(op, 16384, 8192, 8192);
    bool pipelined = false;
    for (const Choice& c : candidates(p, Topology{4, true}, {}, /*any_m=*/true)) {
      EXPECT_NE(c.impl, Impl::kFused) << describe(p);
      EXPECT_NE(c.matmul, Matmul::kSm90) << describe(p);
      pipelined = pipelined || c.impl == Impl::kPipelinedCE;
    }
    EXPECT_TRUE(pipelined) << describe(p);
    GemmProblem f = p;
    f.dtype = DType::kE4M3;
    f.out_dtype = DType::kBF16;
    for (const Choice& c : candidates(f, Topology{4, true}, {}, /*any_m=*/true)) EXPECT_NE(c.impl, Impl::kPipelinedCE);
    EXPECT_FALSE(takes_any_m(f, Impl::kPipelinedCE));
    EXPECT_FALSE(takes_any_m(p, Impl::kPipelinedCE, Matmul::kSm90));
    EXPECT_TRUE(takes_any_m(p, Impl::kPipelinedCE, Matmul::kCublasLt));
  }
}

// Where the rules choose pipelined_ce at a range's top and at its bottom, the range keeps it;
// where they would not at its bottom, the collective-then-matmul implementation serves it.
TEST(ChooseAnyM, KeepsPipelinedWhereTheRulesChooseItAcrossTheRange) {
  const Topology topo{4, true};
  int kept = 0;
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int64_t m = 4; m <= 65536; m *= 2) {
      const GemmProblem p = problem(op, m, 8192, 4096);
      GemmProblem bottom = p;
      bottom.m = range_bottom(p, 4, p.m);
      const Choice top = choose(p, topo, {}), low = choose(bottom, topo, {}), any = choose_any_m(p, topo, {});
      const bool both = top.impl == Impl::kPipelinedCE && low.impl == Impl::kPipelinedCE;
      EXPECT_EQ(any.impl == Impl::kPipelinedCE, both) << describe(p);
      kept += both;
    }
  EXPECT_GT(kept, 0);
}

TEST(CallM, RangesTileEveryM) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int w : {1, 2, 3, 4, 8}) {
      const GemmProblem p = problem(op, op == Op::kGemmAr ? 1000 : 1000 * w, 64, 64);
      const int64_t unit = call_m_unit(p, w);
      for (int64_t m = unit; m < p.m; m += unit) {
        const int64_t top = range_top(p, w, m), bottom = range_bottom(p, w, top);
        EXPECT_LE(bottom, m) << describe(p) << " W=" << w << " m=" << m;
        EXPECT_LE(m, top);
        EXPECT_EQ(range_top(p, w, bottom), top) << describe(p) << " W=" << w << " m=" << m;
        if (bottom > unit) {
          EXPECT_LT(range_top(p, w, bottom - unit), top);
        }
      }
    }
}

// The M a range's candidates are timed at: inside the range, and one a call may have (block
// scales: a multiple of 4 rows; A stored [K, M] packed: 16-byte rows per rank).
TEST(CallM, ARangeIsTimedAtAnMItsCallsMayHave) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int w : {1, 2, 3, 4, 8})
      for (int variant : {0, 1, 2}) {
        GemmProblem base = problem(op, 64, 64, 256);
        if (variant == 1) base.dtype = DType::kE4M3, base.out_dtype = DType::kBF16, base.scale_mode = ScaleMode::kBlock;
        if (variant == 2) base.a_layout = ALayout::kKM;
        const int64_t unit = call_m_unit(base, w);
        for (int64_t top = unit; top <= unit * 256; top *= 2) {
          GemmProblem p = base;
          p.m = top;
          if (!validate_problem(p, w).ok()) continue;
          const int64_t mid = range_middle(p, w);
          EXPECT_GE(mid, range_bottom(p, w, top)) << describe(p) << " W=" << w;
          EXPECT_LE(mid, top) << describe(p) << " W=" << w;
          GemmProblem q = p;
          q.m = mid;
          EXPECT_TRUE(check_call_m(p, w, mid).ok()) << describe(p) << " W=" << w << " mid=" << mid;
          EXPECT_TRUE(validate_layouts(q, w).ok()) << describe(p) << " W=" << w << " mid=" << mid;
          if (top >= unit * 8 && variant == 0) {
            EXPECT_LT(mid, top) << describe(p) << " W=" << w;
          }
        }
      }
}

TEST(CallM, IsCheckedAgainstThePlansM) {
  const GemmProblem ag = problem(Op::kAgGemm, 4096, 1024, 1024), ar = problem(Op::kGemmAr, 4096, 1024, 1024);
  EXPECT_TRUE(check_call_m(ag, 4, 4096).ok());
  EXPECT_TRUE(check_call_m(ag, 4, 4).ok());
  for (int64_t bad : {0, -4, 4100, 6}) {
    const Status s = check_call_m(ag, 4, bad);
    EXPECT_EQ(s.code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message.find("Operands::m"), std::string::npos) << s.message;
  }
  EXPECT_TRUE(check_call_m(ar, 4, 1).ok());  // gemm_ar: any M, fewer rows than ranks too
  EXPECT_TRUE(check_call_m(ar, 4, 3).ok());
  EXPECT_FALSE(check_call_m(ar, 4, 4097).ok());
}

TEST(CallM, RangesArePowersOfTwoUpToThePlansM) {
  const GemmProblem ar = problem(Op::kGemmAr, 16384, 1024, 1024), rs = problem(Op::kGemmRs, 12288, 1024, 1024);
  EXPECT_EQ(range_top(ar, 4, 1), 1);
  EXPECT_EQ(range_top(ar, 4, 3), 4);
  EXPECT_EQ(range_top(ar, 4, 512), 512);
  EXPECT_EQ(range_top(ar, 4, 513), 1024);
  EXPECT_EQ(range_top(ar, 4, 16384), 16384);
  EXPECT_EQ(range_top(rs, 4, 4), 4);
  EXPECT_EQ(range_top(rs, 4, 12), 16);  // in units of W
  EXPECT_EQ(range_top(rs, 4, 8196), 12288);  // capped at the plan's M
  for (int64_t m = 4; m <= rs.m; m += 4) {
    const int64_t top = range_top(rs, 4, m);
    EXPECT_GE(top, m);
    EXPECT_EQ(top % 4, 0);
    EXPECT_TRUE(validate_problem([&] { GemmProblem q = rs; q.m = top; return q; }(), 4).ok());
  }
}

class TuneCacheFile : public ::testing::Test {
 protected:
  void SetUp() override { path_ = strfmt("/tmp/tpgemm-tune-cache-test-%d/sub/cache.txt", static_cast<int>(::getpid())); }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(TuneCacheFile, KeepsTheLastChoiceOfAKey) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  EXPECT_FALSE(cache.find("k1", warnings).has_value());  // no file yet
  cache.store("k1", {Impl::kPipelinedCE, 2, 2, Matmul::kCublasLt}, "baseline 1.0, pipelined_ce/2 0.8", warnings);
  cache.store("k2", {Impl::kPipelinedCE, 4, 0, Matmul::kSm90}, "x", warnings);
  cache.store("k1", {Impl::kFused, 4, 2}, "again", warnings);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  const auto k1 = cache.find("k1", warnings), k2 = cache.find("k2", warnings);
  ASSERT_TRUE(k1 && k2);
  EXPECT_EQ(*k1, (Choice{Impl::kFused, 4, 2, Matmul::kAuto}));
  EXPECT_EQ(*k2, (Choice{Impl::kPipelinedCE, 4, 0, Matmul::kSm90}));
  EXPECT_FALSE(cache.find("k3", warnings).has_value());
  EXPECT_TRUE(warnings.empty());
}

TEST_F(TuneCacheFile, SkipsCorruptLinesWithAWarning) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("k", {Impl::kPipelinedCE, 2, 2, Matmul::kCublasLt}, "", warnings);
  std::ofstream(path_, std::ios::app) << "k\tnot_an_impl\t2\t2\tauto\t\n"
                                      << "k\tfused\t999\t2\tauto\t\n"
                                      << "k\tpipelined_ce\t2\t2\tauto\t\n"   // pipelined_ce names its matmuls
                                      << "k\tfused\t1\t2\tsm90\t\n"          // the others do not
                                      << "k\tfused\t1\t2\t\n"                 // format 1's five fields
                                      << "garbage without tabs\n";
  const auto k = cache.find("k", warnings);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->impl, Impl::kPipelinedCE);  // the good line; the bad ones never win
  ASSERT_EQ(warnings.size(), 4u);  // three of the six, then a count
  EXPECT_NE(warnings[3].find("3 more lines skipped"), std::string::npos) << warnings[3];
}

TEST_F(TuneCacheFile, IgnoresAForeignFile) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("k", {Impl::kPipelinedCE, 2, 2, Matmul::kCublasLt}, "", warnings);
  const std::string foreign = "some other tool's file\nk\tfused\t1\t2\tauto\t\n";
  std::ofstream(path_) << foreign;
  EXPECT_FALSE(cache.find("k", warnings).has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("not a tpgemm tuning cache"), std::string::npos);
  // A store leaves the file as it was, with a warning.
  cache.store("k", {Impl::kFused, 1, 2}, "", warnings);
  EXPECT_EQ(warnings.size(), 2u);
  std::ifstream in(path_);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), foreign);
}

// A file of the format before the matmul field (its entries were tuned without the Hopper core
// among the candidates) is never read, and the next store starts it anew.
TEST_F(TuneCacheFile, StartsAFileOfAnOlderFormatAnew) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("other", {Impl::kFused, 1, 2}, "", warnings);  // makes the directories
  std::ofstream(path_) << "tpgemm-tune-cache 1\nk\tfused\t1\t2\t\n";
  EXPECT_FALSE(cache.find("k", warnings).has_value());
  EXPECT_EQ(warnings.size(), 1u);
  warnings.clear();
  cache.store("k", {Impl::kPipelinedCE, 2, 2, Matmul::kSm90}, "", warnings);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  const auto k = cache.find("k", warnings);
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->matmul, Matmul::kSm90);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  std::ifstream in(path_);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "tpgemm-tune-cache 2");
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(TuneCacheFile, LeavesANewerFormatAlone) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("other", {Impl::kFused, 1, 2}, "", warnings);  // makes the directories
  const std::string newer = "tpgemm-tune-cache 3\nk\tfused\t1\t2\tauto\t\t\n";
  std::ofstream(path_) << newer;
  EXPECT_FALSE(cache.find("k", warnings).has_value());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("newer tpgemm"), std::string::npos) << warnings[0];
  cache.store("k", {Impl::kFused, 1, 2}, "", warnings);
  EXPECT_EQ(warnings.size(), 2u);
  EXPECT_EQ(file_text(path_), newer);
}

// A file just created by another process (or emptied by a full disk) holds no entries, and is no
// reason for a warning; the next store writes the header.
TEST_F(TuneCacheFile, AnEmptyFileHasNoEntries) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("other", {Impl::kFused, 1, 2}, "", warnings);
  std::ofstream(path_, std::ios::trunc).close();
  EXPECT_FALSE(cache.find("k", warnings).has_value());
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  cache.store("k", {Impl::kFused, 2, 2}, "", warnings);
  EXPECT_EQ(cache.find("k", warnings), (Choice{Impl::kFused, 2, 2, Matmul::kAuto}));
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

// A process that died mid-line leaves a last line without its newline: the next store ends it
// first, so that its own line stands alone (and the cut one is skipped with a warning).
TEST_F(TuneCacheFile, AStoreAfterACutLineKeepsItsOwn) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("k1", {Impl::kFused, 1, 2}, "", warnings);
  std::ofstream(path_, std::ios::app) << "k2\tpipelined_ce\t2";  // cut
  cache.store("k3", {Impl::kFused, 4, 2}, "", warnings);
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_EQ(cache.find("k3", warnings), (Choice{Impl::kFused, 4, 2, Matmul::kAuto}));
  EXPECT_EQ(warnings.size(), 1u);  // the cut line's
}

// A first write cut inside the header leaves a file that is no cache yet: no entries, no
// warning, and the next store writes it whole.
TEST_F(TuneCacheFile, ACutHeaderIsWrittenAgain) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("other", {Impl::kFused, 1, 2}, "", warnings);
  std::ofstream(path_, std::ios::trunc) << "tpgemm-tune-ca";
  EXPECT_FALSE(cache.find("k", warnings).has_value());
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  cache.store("k", {Impl::kFused, 2, 2}, "", warnings);
  EXPECT_EQ(cache.find("k", warnings), (Choice{Impl::kFused, 2, 2, Matmul::kAuto}));
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

// A rewrite keeps a key's last whole line: one cut after it neither hides it nor is kept.
TEST_F(TuneCacheFile, ARewriteKeepsAKeysLastWholeLine) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("seed", {Impl::kFused, 1, 2}, "", warnings);  // makes the file and its header
  {
    std::ofstream out(path_, std::ios::app);
    for (int i = 0; i < 1700; ++i) out << "key" << i << "\tfused\t1\t2\tauto\t" << std::string(600, 'x') << "\n";
    out << "k\tfused\t2\t2\tauto\t\n"        // the last whole line of "k"
        << "k\tpipelined_ce\t4\n";              // then a cut one (three fields)
  }
  ASSERT_GT(static_cast<long>(file_text(path_).size()), TuneCache::kCompactBytes);
  cache.store("trigger", {Impl::kFused, 1, 2}, "", warnings);  // rewrites the file
  ASSERT_LT(static_cast<long>(file_text(path_).size()), TuneCache::kCompactBytes);
  EXPECT_EQ(cache.find("k", warnings), (Choice{Impl::kFused, 2, 2, Matmul::kAuto}));
  EXPECT_TRUE(warnings.empty()) << "the cut line was kept: " << warnings[0];
}

TEST_F(TuneCacheFile, WarnsAboutAFewBadLinesAndCountsTheRest) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("k", {Impl::kFused, 1, 2}, "", warnings);
  {
    std::ofstream out(path_, std::ios::app);
    for (int i = 0; i < 50; ++i) out << "junk line " << i << "\n";
  }
  EXPECT_TRUE(cache.find("k", warnings).has_value());
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_NE(warnings[3].find("47 more lines skipped"), std::string::npos) << warnings[3];
}

// Past TuneCache::kCompactBytes the file is rewritten with the newest keys' last lines.
TEST_F(TuneCacheFile, StaysBounded) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  const std::string detail(600, 'x');
  const int keys = 2000;  // about 1.4 MB of lines
  for (int i = 0; i < keys; ++i) cache.store(strfmt("key%d", i), {Impl::kFused, 1 + i % 8, 2}, detail, warnings);
  cache.store("key5", {Impl::kFused, 3, 2}, detail, warnings);  // an old key stored again is new
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_LE(static_cast<long>(file_text(path_).size()), TuneCache::kCompactBytes);
  EXPECT_EQ(cache.find(strfmt("key%d", keys - 1), warnings), (Choice{Impl::kFused, 1 + (keys - 1) % 8, 2, Matmul::kAuto}));
  EXPECT_EQ(cache.find("key5", warnings), (Choice{Impl::kFused, 3, 2, Matmul::kAuto}));
  EXPECT_FALSE(cache.find("key6", warnings).has_value());  // among the oldest, dropped
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

// Runs `kWriters` processes that each store `each` keys with details of `detail_bytes`; true if
// none of them had a warning.
bool store_from_processes(const TuneCache& cache, int writers, int each, size_t detail_bytes) {
  std::vector<pid_t> children;
  for (int w = 0; w < writers; ++w) {
    const pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
      std::vector<std::string> mine;
      for (int i = 0; i < each; ++i)
        cache.store(strfmt("w%d-%d", w, i), {Impl::kFused, 1 + i % 8, 2}, std::string(detail_bytes, 'y'), mine);
      ::_exit(mine.empty() ? 0 : 1);
    }
    children.push_back(pid);
  }
  bool ok = true;
  for (const pid_t pid : children) {
    int status = 0;
    ok = ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && ok;
  }
  return ok;
}

// Writers in several processes at once (the ranks of jobs that share a home directory) lose no
// line and leave none torn.
TEST_F(TuneCacheFile, ConcurrentWritersLoseNothing) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("seed", {Impl::kFused, 1, 2}, "", warnings);
  ASSERT_TRUE(store_from_processes(cache, 4, 200, 300));
  for (int w = 0; w < 4; ++w)
    for (int i = 0; i < 200; ++i)
      ASSERT_EQ(cache.find(strfmt("w%d-%d", w, i), warnings), (Choice{Impl::kFused, 1 + i % 8, 2, Matmul::kAuto}))
          << "w" << w << "-" << i;
  EXPECT_TRUE(warnings.empty()) << warnings[0];
}

// The same with rewrites among the appends: every line left parses, and the file stays bounded.
TEST_F(TuneCacheFile, ConcurrentRewritesLeaveAReadableFile) {
  const TuneCache cache(path_);
  std::vector<std::string> warnings;
  cache.store("seed", {Impl::kFused, 1, 2}, "", warnings);
  ASSERT_TRUE(store_from_processes(cache, 4, 200, 3000));  // about 2.4 MB of lines
  EXPECT_FALSE(cache.find("absent", warnings).has_value());
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  EXPECT_LE(static_cast<long>(file_text(path_).size()), TuneCache::kCompactBytes + 4000);
}

TEST(TuneKey, NamesEverythingTheTimeDependsOn) {
  TuneContext ctx{"NVIDIA H200", 22809, {4, true}, "", " cublaslt=130000 cudart=13000 driver=13000"};
  const GemmProblem p = problem(Op::kGemmRs, 4096, 8192, 2048);
  const PlanOptions o;
  const std::vector<Choice> cands = candidates(p, ctx.topo, o, false);
  const std::string k = tune_key(ctx, p, o, false, cands);
  for (const char* part : {"NVIDIA H200", "sms=132", "W=4", "nccl=22809", "tpgemm=", "cublaslt=130000", "gemm_rs", "M=4096"})
    EXPECT_NE(k.find(part), std::string::npos) << part << " in " << k;
  EXPECT_EQ(k.find('\t'), std::string::npos);
  TuneContext other = ctx;
  other.topo.world = 2;
  EXPECT_NE(tune_key(other, p, o, false, cands), k);
  other = ctx;
  other.topo.num_sms = 114;
  EXPECT_NE(tune_key(other, p, o, false, cands), k);
  other = ctx;
  other.timing += " NCCL_ALGO=Ring";
  EXPECT_NE(tune_key(other, p, o, false, cands), k);
  EXPECT_NE(tune_key(ctx, p, o, true, cands), k);
  // Every option that narrows the candidates: a constrained plan's winner is no answer for an
  // unconstrained one, nor the other way.
  for (const auto& narrowed : std::vector<std::function<void(PlanOptions&)>>{
           [](PlanOptions& x) { x.return_gathered_a = true; }, [](PlanOptions& x) { x.deterministic = true; },
           [](PlanOptions& x) { x.chunks_per_rank = 2; }, [](PlanOptions& x) { x.comm_sms = 0; },
           [](PlanOptions& x) { x.matmul = Matmul::kCublasLt; }}) {
    PlanOptions n = o;
    narrowed(n);
    EXPECT_NE(tune_key(ctx, p, n, false, cands), k);
  }
  GemmProblem fp32_d = p;
  fp32_d.out_dtype = DType::kFP32;
  EXPECT_NE(tune_key(ctx, fp32_d, o, false, cands), k);
  TuneContext direct = ctx;  // a setting that changes a schedule (NOTE [direct stores])
  direct.settings = " TPGEMM_PIPELINED_DIRECT=1";
  EXPECT_NE(tune_key(direct, p, o, false, cands).find("TPGEMM_PIPELINED_DIRECT=1"), std::string::npos);
  direct.device = "odd\tname";
  EXPECT_EQ(tune_key(direct, p, o, false, cands).find('\t'), std::string::npos);
  // Another set of candidates (a tpgemm that times one more, or one fewer): another key.
  std::vector<Choice> fewer = cands;
  fewer.pop_back();
  EXPECT_NE(tune_key(ctx, p, o, false, fewer), k);
  std::vector<Choice> other_chunks = cands;
  other_chunks.back().chunks += 1;
  EXPECT_NE(tune_key(ctx, p, o, false, other_chunks), k);
}

TEST(RandomShapes, AreValidAndReproducible) {
  bench::ShapeDraw d;
  d.seed = 12345;
  d.per_op = 200;
  d.world = 4;
  const auto a = bench::draw_shapes({Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}, d), b = bench::draw_shapes({Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}, d);
  ASSERT_EQ(a.size(), 600u);
  bool small_ar = false, odd_n = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].m, b[i].m);
    EXPECT_EQ(a[i].n, b[i].n);
    GemmProblem p = problem(a[i].op, a[i].m, a[i].n, a[i].k);
    EXPECT_TRUE(validate_problem(p, 4).ok()) << describe(p);
    EXPECT_LE(a[i].m * a[i].n * a[i].k, d.max_macs);
    small_ar = small_ar || (a[i].op == Op::kGemmAr && a[i].m < 4);
    odd_n = odd_n || a[i].n / 8 % 2 == 1;
  }
  EXPECT_TRUE(small_ar);
  EXPECT_TRUE(odd_n);
  d.seed = 12346;
  EXPECT_NE(bench::draw_shapes({Op::kAgGemm}, d)[0].m * 100000 + bench::draw_shapes({Op::kAgGemm}, d)[0].n,
            a[0].m * 100000 + a[0].n);
}

}  // namespace
}  // namespace tpgemm::plan
