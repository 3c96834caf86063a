// W = 2 and 4 ranks: every op x dtype x B layout x implementation against an fp32 reference,
// on fresh random data with poisoned outputs, on shapes that are not multiples of any tile;
// random shapes, pipelined_ce's chunkings and matmuls, the shards along N, CUDA graph replays,
// the options a plan reports, auto's tuning, calls back to back. More of the ops' tests share
// this fixture (ops_cases.h): test_types.cpp, test_any_m.cpp, test_fused.cpp, test_allreduce.cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/format.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "bench/random_shapes.h"
#include "plan/schedule.h"
#include "testing/problem_data.h"
#include "testing/testing.h"
#include "dist/ops_cases.h"

namespace tpgemm {
namespace {

using testsupport::check_plan;
using testsupport::describe_check;

TEST_P(Dist, EveryOpDtypeLayoutAndImplementationMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 1;
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (DType dt : {DType::kBF16, DType::kFP16})
                  for (BLayout layout : {BLayout::kKN, BLayout::kNK})
                    for (int variant : {0, 1})
                      for (Impl impl : impls_for(op)) {
                        const GemmProblem p = problem(op, W, dt, layout, variant, impl);
                        PlanOptions o;
                        o.impl = impl;
                        const auto c = check_plan(team, p, o, 2, seed += 10);
                        RANK_EXPECT(c.ok, "%s", describe_check(p, o, c).c_str());
                      }
            }),
            0);
}

// Shapes nobody chose (bench/random_shapes.h; a fixed small draw, the seed in the message):
// every implementation that accepts a shape, auto included, matches the reference.
TEST_P(Dist, RandomShapesMatchTheReferenceInEveryImplementation) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  bench::ShapeDraw draw;
  draw.seed = 20261126;
  draw.per_op = 5;
  draw.world = W;
  draw.max_m = 1536, draw.max_nk = 1024, draw.max_macs = int64_t(1) << 28;
  const auto shapes = bench::draw_shapes({Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}, draw);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 4000;
              for (const bench::RandomShape& r : shapes)
                for (Impl impl : impls_for(r.op)) {
                  GemmProblem p;
                  p.op = r.op;
                  p.m = r.m, p.n = r.n, p.k = r.k;
                  PlanOptions o;
                  o.impl = impl;
                  if (!Plan::can_implement(team, p, o).ok()) continue;
                  const auto c = check_plan(team, p, o, 1, seed += 10);
                  RANK_EXPECT(c.ok, "draw seed %llu: %s", (unsigned long long)draw.seed, describe_check(p, o, c).c_str());
                }
            }),
            0);
}

TEST_P(Dist, PipelinedChunkingsAndCarveOutsMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 500;
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (int chunks : {2, 3})
                  for (int comm_sms : {0, 4}) {
                    const GemmProblem p = problem(op, W, DType::kBF16, BLayout::kNK, chunks == 3 ? 1 : 0);
                    PlanOptions o;
                    o.impl = Impl::kPipelinedCE;
                    o.chunks_per_rank = chunks;
                    o.comm_sms = comm_sms;
                    const auto c = check_plan(team, p, o, 3, seed += 10);
                    RANK_EXPECT(c.ok, "%s", describe_check(p, o, c).c_str());
                  }
            }),
            0);
}

// pipelined_ce's matmuls on the Hopper GEMM core (PlanOptions::matmul): one chunk, two (the ring
// of partials as C at W=2 without C), three; both dtypes and B layouts; batched, scaled, with C.
TEST_P(Dist, PipelinedOnTheHopperCoreMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 700;
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (DType dt : {DType::kBF16, DType::kFP16})
                  for (BLayout layout : {BLayout::kNK, BLayout::kKN})
                    for (int chunks : {1, 2, 3}) {
                      const GemmProblem p = problem(op, W, dt, layout, chunks == 3 ? 1 : 0);
                      PlanOptions o;
                      o.impl = Impl::kPipelinedCE;
                      o.chunks_per_rank = chunks;
                      o.matmul = Matmul::kSm90;
                      const auto c = check_plan(team, p, o, 2, seed += 10);
                      RANK_EXPECT(c.ok, "%s", describe_check(p, o, c).c_str());
                      const Status s = testsupport::caught([&] {
                        const Plan plan(team, p, o);
                        RANK_EXPECT(plan.options().matmul == Matmul::kSm90, "matmul %s",
                                    std::string(to_string(plan.options().matmul)).c_str());
                      });
                      RANK_EXPECT(s.ok(), "%s", s.message.c_str());
                    }
            }),
            0);
}

// NOTE [direct stores] (TPGEMM_PIPELINED_DIRECT=1): the matmuls store the peers' partials into
// their receive slots themselves, on cuBLASLt and on the Hopper core; 1 to 3 chunks, batched and
// with C (variant 1), three calls each, one case replayed from a CUDA graph.
TEST_P(Dist, PipelinedWithDirectStoresMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              ::setenv("TPGEMM_PIPELINED_DIRECT", "1", 1);
              uint64_t seed = 1100;
              for (Op op : {Op::kGemmRs, Op::kGemmAr})
                for (Matmul mm : {Matmul::kCublasLt, Matmul::kSm90})
                  for (int chunks : {1, 2, 3}) {
                    const int variant = chunks == 2 ? 1 : 0;
                    const GemmProblem p = problem(op, W, DType::kBF16, chunks == 3 ? BLayout::kKN : BLayout::kNK, variant);
                    PlanOptions o;
                    o.impl = Impl::kPipelinedCE;
                    o.chunks_per_rank = chunks;
                    o.matmul = mm;
                    const bool graph = chunks == 3 && mm == Matmul::kSm90;
                    const auto c = check_plan(team, p, o, 3, seed += 10, graph);
                    RANK_EXPECT(c.ok, "TPGEMM_PIPELINED_DIRECT=1 %s%s", describe_check(p, o, c).c_str(),
                                graph ? " (graph)" : "");
                  }
              ::unsetenv("TPGEMM_PIPELINED_DIRECT");
            }),
            0);
}

// Along N (CUTLASS's RotatingB all-gather and TilingB reduce-scatter): B's columns gathered, or
// D's columns scattered, in both B layouts, with and without batch and C, directly and from a
// CUDA graph. M is not a multiple of W (nothing is split along M) nor of any tile.
TEST_P(Dist, AlongNEveryLayoutAndImplementationMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 800;
              for (Op op : {Op::kAgGemm, Op::kGemmRs})
                for (BLayout layout : {BLayout::kKN, BLayout::kNK})
                  for (int variant : {0, 1})
                    for (Impl impl : {Impl::kBaseline, Impl::kPipelinedCE, Impl::kGemmReduceScatter, Impl::kAuto})
                      for (bool graph : {false, true}) {
                        if (impl == Impl::kGemmReduceScatter && op != Op::kGemmRs) continue;
                        GemmProblem p = problem(op, W, variant ? DType::kFP16 : DType::kBF16, layout, variant, impl);
                        p.shard_dim = ShardDim::kN;
                        p.m = 203;
                        p.n = W * 136;  // 136 columns per rank
                        PlanOptions o;
                        o.impl = impl;
                        const auto c = check_plan(team, p, o, 2, seed += 10, graph);
                        RANK_EXPECT(c.ok, "%s%s", graph ? "graph replay: " : "", describe_check(p, o, c).c_str());
                      }
            }),
            0);
}

TEST_P(Dist, CudaGraphReplaysNeedNoReset) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              struct Case {
                Op op;
                Impl impl;
                int chunks;  // 0: the planner's
              };
              std::vector<Case> cases;
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (Impl impl : impls_for(op)) cases.push_back({op, impl, 0});
              // gemm_rs and gemm_ar in chunks without C: the ring of partials as C (NOTE [partial as C]).
              for (Op op : {Op::kGemmRs, Op::kGemmAr}) cases.push_back({op, Impl::kPipelinedCE, 2});
              uint64_t seed = 900;
              for (const Case& k : cases) {
                const GemmProblem p = problem(k.op, W, DType::kBF16, BLayout::kNK, 0, k.impl);
                PlanOptions o;
                o.impl = k.impl;
                o.chunks_per_rank = k.chunks;
                const auto c = check_plan(team, p, o, 4, seed += 10, /*graph=*/true);
                RANK_EXPECT(c.ok, "graph replay: %s", describe_check(p, o, c).c_str());
              }
            }),
            0);
}

// PlanOptions::return_gathered_a: every implementation that returns the gathered A writes the
// whole A, byte for byte, beside a correct D: one batch entry, and batch entries sharing one B
// (the torch layer's batch-first activations would need those), eagerly and replayed.
TEST_P(Dist, TheGatheredAIsTheWholeA) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 9400;
              for (Impl impl : {Impl::kAuto, Impl::kBaseline, Impl::kPipelinedCE, Impl::kFused, Impl::kAllGatherGemm})
                for (int64_t l : {int64_t(1), int64_t(3)})
                  for (bool graph : {false, true}) {
                    GemmProblem p;
                    p.op = Op::kAgGemm;
                    p.m = 256 * W, p.n = 256, p.k = 136, p.l = l;
                    p.b_broadcast = l > 1;
                    PlanOptions o;
                    o.impl = impl;
                    o.return_gathered_a = true;
                    if (!Plan::can_implement(team, p, o).ok()) continue;  // (alike on every rank)
                    const auto c = check_plan(team, p, o, 2, seed += 10, graph);
                    RANK_EXPECT(c.ok, "%s: %s", graph ? "replayed" : "eager", describe_check(p, o, c).c_str());
                  }
            }),
            0);
}

// Plan::options reports what the planner resolved: the options asked for, and auto's choice.
TEST_P(Dist, PlanReportsTheOptionsItResolved) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              const GemmProblem p = problem(Op::kGemmRs, W, DType::kBF16, BLayout::kNK, 0);
              PlanOptions o;
              o.impl = Impl::kPipelinedCE;
              o.chunks_per_rank = 3;
              o.comm_sms = 6;
              const Status s = testsupport::caught([&] {
                const Plan asked(team, p, o), automatic(team, p);
                const PlanOptions a = asked.options(), b = automatic.options();
                RANK_EXPECT(a.impl == Impl::kPipelinedCE && a.chunks_per_rank == 3 && a.comm_sms == 6,
                            "asked pipelined_ce, 3 chunks, 6 SMs; got %s, %d, %d", std::string(to_string(a.impl)).c_str(),
                            a.chunks_per_rank, a.comm_sms);
                RANK_EXPECT(b.impl == automatic.impl() && b.impl != Impl::kAuto && b.chunks_per_rank >= 1,
                            "auto resolved to %s, %d chunks", std::string(to_string(b.impl)).c_str(), b.chunks_per_rank);
              });
              RANK_EXPECT(s.ok(), "%s", s.message.c_str());
            }),
            0);
}

// auto with tuning: the plan reports every candidate's time and runs the fastest (or an earlier
// one within plan::fastest's tie; of the near ties timed again, where they were), and matches the
// reference; a second plan of the problem takes the choice from the tuning cache; with tuning
// off, the rules decide.
TEST_P(Dist, AutoRunsWhatItsTuningMeasuredFastest) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              const std::string cache = strfmt("/tmp/tpgemm-dist-tune-%d.txt", static_cast<int>(::getpid()));
              std::remove(cache.c_str());
              ::setenv("TPGEMM_TUNE_CACHE", cache.c_str(), 1);
              GemmProblem p;
              p.op = Op::kAgGemm;
              p.m = 512 * W, p.n = 1024, p.k = 1024;
              PlanOptions o;
              o.tune = PlanOptions::Tune::kOn;
              const Status s = testsupport::caught([&] {
                const Plan tuned(team, p, o);
                const PlanSelection& sel = tuned.selection();
                const PlanOptions got = tuned.options();
                std::string name(to_string(got.impl));
                // (as the tuner's describe() names a candidate)
                if (got.impl == Impl::kPipelinedCE || got.impl == Impl::kFused) name += strfmt("/%d", got.chunks_per_rank);
                if (got.impl == Impl::kFused && got.comm_sms > 0) name += strfmt("/%dsm", got.comm_sms);
                if (got.matmul == Matmul::kSm90) name += "/sm90";
                // "name time, name time, ...": the fastest time, and the chosen one's; where near
                // ties ran again in alternation (NOTE [runoff]), among those
                double fastest = 1e30, chosen = -1;
                const std::string runoff = "; in alternation:";
                const size_t at = sel.detail.find(runoff);
                std::stringstream table(at == std::string::npos ? sel.detail : sel.detail.substr(at + runoff.size()));
                std::string entry;
                while (std::getline(table, entry, ',')) {
                  std::stringstream fields(entry);
                  std::string n;
                  double ms = -1;
                  fields >> n >> ms;
                  if (ms > 0) fastest = std::min(fastest, ms);
                  if (ms > 0 && n == name) chosen = ms;
                }
                // (plan::fastest: ties within 1%, the baseline's within 2%)
                const double tie = got.impl == Impl::kBaseline ? 1.0201 : 1.0101;
                RANK_EXPECT(sel.source == PlanSelection::Source::kTuned && chosen > 0 && chosen <= fastest * tie,
                            "source %s, runs %s, table: %s", std::string(to_string(sel.source)).c_str(), name.c_str(),
                            sel.detail.c_str());
                const Plan again(team, p, o);
                RANK_EXPECT(again.selection().source == PlanSelection::Source::kCached && again.impl() == got.impl &&
                                again.options().matmul == got.matmul,
                            "second plan: %s, %s", std::string(to_string(again.selection().source)).c_str(),
                            std::string(to_string(again.impl())).c_str());
                o.tune = PlanOptions::Tune::kOff;
                const Plan rules(team, p, o);
                RANK_EXPECT(rules.selection().source == PlanSelection::Source::kFallback, "tuning off: %s",
                            std::string(to_string(rules.selection().source)).c_str());
              });
              RANK_EXPECT(s.ok(), "%s", s.message.c_str());
              o.tune = PlanOptions::Tune::kOn;
              const auto c = check_plan(team, p, o, 1, 91);
              RANK_EXPECT(c.ok, "%s", describe_check(p, o, c).c_str());
              ::unsetenv("TPGEMM_TUNE_CACHE");
              std::remove(cache.c_str());
            }),
            0);
}

// Plans run back to back on a stream with nothing synchronised between calls, each call on its
// own operands: a rank that ran ahead must not overwrite what a slower peer is still reading
// (NOTE [two staging halves] for the symmetric collectives; the flags' epochs elsewhere).
TEST_P(Dist, PlanCallsBackToBackEachComputeTheirOwnOperands) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              constexpr int kCalls = 4;
              struct Case {
                Op op;
                Impl impl;
                bool direct = false;  // NOTE [direct stores], rank 1's host late before each call
              };
              const Case cases[] = {
                  {Op::kAgGemm, Impl::kAllGatherGemm}, {Op::kAgGemm, Impl::kPipelinedCE}, {Op::kAgGemm, Impl::kFused},
                  {Op::kGemmRs, Impl::kGemmReduceScatter}, {Op::kGemmRs, Impl::kPipelinedCE}, {Op::kGemmRs, Impl::kFused},
                  {Op::kGemmAr, Impl::kGemmOneShot}, {Op::kGemmAr, Impl::kGemmTwoShot}, {Op::kGemmAr, Impl::kPipelinedCE},
                  {Op::kGemmAr, Impl::kFused}, {Op::kGemmRs, Impl::kPipelinedCE, true},
                  {Op::kGemmAr, Impl::kPipelinedCE, true}};
              for (const auto& [op, impl, direct] : cases) {
                const GemmProblem p = problem(op, W, DType::kBF16, BLayout::kNK, 1, impl);
                PlanOptions o;
                o.impl = impl;
                if (direct) ::setenv("TPGEMM_PIPELINED_DIRECT", "1", 1);
                const Status s = testsupport::caught([&] {
                  Stream stream = Stream::create();
                  const cudaStream_t st = stream.get();
                  Plan plan(team, p, o);
                  std::vector<std::unique_ptr<testing::RankData>> data;
                  const int64_t d_count = operand_sizes(p, W).d;
                  for (int call = 0; call < kCalls; ++call) {
                    data.push_back(std::make_unique<testing::RankData>(p, W, team.rank(), 3000 + call, st));
                    testing::poison(data.back()->d.get(), d_count, d_dtype(p), st);
                  }
                  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                  team.barrier();
                  for (int call = 0; call < kCalls; ++call) {
                    if (direct && team.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                    plan.run(data[call]->operands(), st);
                  }
                  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                  team.check();
                  for (int call = 0; call < kCalls; ++call) {
                    const DeviceBuffer want = testing::expected_d(p, W, team.rank(), 3000 + call, testing::RefEngine::kNaive,
                                                                  team.state()->lt, st);
                    const testing::Diff d = testing::compare_d(data[call]->d.get(), want, p, W, st);
                    RANK_EXPECT(d.passes(testing::default_eps(p)), "%s %s%s call %d: rel_err %.2e, %lld non-finite",
                                describe(p).c_str(), std::string(to_string(impl)).c_str(), direct ? " direct" : "", call,
                                d.rel_err, (long long)d.nonfinite);
                  }
                });
                ::unsetenv("TPGEMM_PIPELINED_DIRECT");
                RANK_EXPECT(s.ok(), "%s %s%s: %s", describe(p).c_str(), std::string(to_string(impl)).c_str(),
                            direct ? " direct" : "", s.message.c_str());
              }
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(W, Dist, ::testing::Values(2, 4, 8), [](const auto& info) { return strfmt("W%d", info.param); });

}  // namespace
}  // namespace tpgemm
