// Calls replayed from graphs (NOTE [call graphs] in src/ops/call_graphs.h; the plans here are
// made with TPGEMM_CALL_GRAPHS=1): a plan called with operands at kSets addresses in turn (more
// than a few layers' worth) runs each address set directly, then captured, then replayed; every
// call gets fresh data at the same addresses and a poisoned D, and must match the reference. On
// odd ranks every other operand set takes a fresh D every call (never replayed), so ranks that
// replay meet ranks that run directly in one call. A stream of the test's and both default
// streams take turns, since a graph is launched onto whichever stream the call names.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/format.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "testing/problem_data.h"
#include "testing/testing.h"

namespace tpgemm {
namespace {

constexpr int kSets = 10;
constexpr int kCalls = 3 * kSets;

struct Case {
  Op op;
  Impl impl;
  int64_t rows_per_rank;  // M = W * rows_per_rank; negative: M itself is its absolute value
  int chunks = 0;
  bool has_c = false;
};

class CallGraphs : public ::testing::TestWithParam<int> {};

// A plan that replays its calls, whatever TPGEMM_CALL_GRAPHS says outside the test.
Plan replaying_plan(const Team& team, const GemmProblem& p, const PlanOptions& o) {
  ::setenv("TPGEMM_CALL_GRAPHS", "1", 1);
  Plan plan(team, p, o);
  ::unsetenv("TPGEMM_CALL_GRAPHS");
  return plan;
}

// This rank's D of a call made on data filled from `fill`, against the fp32 reference.
testing::Diff diff_from_reference(const Team& team, const GemmProblem& p, int W, const void* d, uint64_t fill,
                                  cudaStream_t st) {
  const DeviceBuffer want =
      testing::expected_d(p, W, team.rank(), fill, testing::RefEngine::kNaive, team.state()->lt, st);
  return testing::compare_d(d, want, p, W, st);
}

TEST_P(CallGraphs, ReplayedCallsReadTheirOperandsAnewAndMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              const Case cases[] = {
                  {Op::kAgGemm, Impl::kPipelinedCE, 128, 2}, {Op::kAgGemm, Impl::kFused, 256},
                  {Op::kGemmRs, Impl::kPipelinedCE, 128, 2}, {Op::kGemmRs, Impl::kFused, 256},
                  {Op::kGemmAr, Impl::kPipelinedCE, 128, 1, true}, {Op::kGemmAr, Impl::kFused, -16},
                  {Op::kGemmAr, Impl::kGemmOneShot, 64},     {Op::kAgGemm, Impl::kAuto, 96},
                  {Op::kAgGemm, Impl::kAllGatherGemm, 64},   {Op::kGemmRs, Impl::kGemmReduceScatter, 64},
              };
              Stream own = Stream::create();
              uint64_t seed = 9100;
              for (const Case& c : cases) {
                GemmProblem p;
                p.op = c.op;
                p.m = c.rows_per_rank > 0 ? c.rows_per_rank * W : -c.rows_per_rank;
                p.n = 384, p.k = 256;
                p.has_c = c.has_c;
                p.beta = c.has_c ? 0.5f : 0.0f;
                PlanOptions o;
                o.impl = c.impl;
                o.chunks_per_rank = c.chunks;
                const std::string what = describe(p) + " impl=" + std::string(to_string(c.impl));
                const Status s = testsupport::caught([&] {
                  Plan plan = replaying_plan(team, p, o);
                  const cudaStream_t st = own.get();
                  // kSets operand sets in turn; on odd ranks the odd sets' D is fresh on every call.
                  std::vector<std::unique_ptr<testing::RankData>> sets;
                  for (int j = 0; j < kSets; ++j)
                    sets.push_back(std::make_unique<testing::RankData>(p, W, team.rank(), seed + j, st));
                  const int64_t d_count = operand_sizes(p, W).d;
                  for (int i = 0; i < kCalls; ++i) {
                    testing::RankData& data = *sets[i % kSets];
                    std::unique_ptr<DeviceBuffer> fresh_d;
                    Operands ops = data.operands();
                    if (i % kSets % 2 == 1 && team.rank() % 2 == 1) {
                      fresh_d = std::make_unique<DeviceBuffer>(static_cast<size_t>(d_count) * dtype_size(d_dtype(p)));
                      ops.d = fresh_d->get();
                    }
                    const cudaStream_t call_stream = i % 3 == 0 ? st : i % 3 == 1 ? cudaStreamLegacy : cudaStreamPerThread;
                    const uint64_t fill = seed + 10 + static_cast<uint64_t>(i);
                    data.refill(fill, st);
                    testing::poison(ops.d, d_count, d_dtype(p), st);
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                    plan.run(ops, call_stream);
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(call_stream));
                    team.check();
                    const testing::Diff d = diff_from_reference(team, p, W, ops.d, fill, st);
                    RANK_EXPECT(d.passes(testing::default_eps(p)), "%s (%s) call %d: rel_err %.3g, %lld not finite",
                                what.c_str(), std::string(to_string(plan.impl())).c_str(), i, d.rel_err,
                                (long long)d.nonfinite);
                  }
                });
                RANK_EXPECT(s.ok(), "%s: %s", what.c_str(), s.message.c_str());
                seed += 100;
              }
            }),
            0);
}

// More addresses recur than a plan keeps graphs (src/ops/replay_cache.h): D at 300 addresses in
// turn, four rounds, back to back. The second round captures every call and evicts graphs still
// in flight; the later ones replay the graphs kept and run the others directly. Every 25th call
// of a round (a different one each round) gets fresh data and a poisoned D and is checked.
TEST_P(CallGraphs, MoreAddressesThanGraphsKept) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              constexpr int kDs = 300, kRounds = 4, kEvery = 25;
              GemmProblem p;
              p.op = Op::kAgGemm;
              p.m = 64 * W, p.n = 384, p.k = 256;
              PlanOptions o;
              o.impl = Impl::kPipelinedCE;
              o.chunks_per_rank = 2;
              const Status s = testsupport::caught([&] {
                Plan plan = replaying_plan(team, p, o);
                Stream own = Stream::create();
                const cudaStream_t st = own.get();
                testing::RankData data(p, W, team.rank(), 9700, st);
                const int64_t d_count = operand_sizes(p, W).d;
                std::vector<DeviceBuffer> ds;
                for (int j = 0; j < kDs; ++j) ds.emplace_back(static_cast<size_t>(d_count) * dtype_size(d_dtype(p)));
                for (int round = 0; round < kRounds; ++round)
                  for (int j = 0; j < kDs; ++j) {
                    Operands ops = data.operands();
                    ops.d = ds[j].get();
                    if (j % kEvery != round) {
                      plan.run(ops, st);
                      continue;
                    }
                    const uint64_t fill = 9800 + static_cast<uint64_t>(round * kDs + j);
                    data.refill(fill, st);
                    testing::poison(ops.d, d_count, d_dtype(p), st);
                    plan.run(ops, st);
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                    team.check();
                    const testing::Diff d = diff_from_reference(team, p, W, ops.d, fill, st);
                    RANK_EXPECT(d.passes(testing::default_eps(p)), "round %d, D %d: rel_err %.3g, %lld not finite",
                                round, j, d.rel_err, (long long)d.nonfinite);
                  }
                TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                team.check();
              });
              RANK_EXPECT(s.ok(), "%s", s.message.c_str());
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(W, CallGraphs, ::testing::Values(2, 4, 8), [](const auto& info) { return strfmt("W%d", info.param); });

}  // namespace
}  // namespace tpgemm
