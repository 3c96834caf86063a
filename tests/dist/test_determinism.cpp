// Repeatable reductions: the same operands give the same bits of D, call after call and across a
// plan made again, for every implementation tpgemm runs its own reduction in (the baseline's is
// NCCL's, which promises no order, and is left out: docs/design.md, "Determinism"); auto under
// PlanOptions::deterministic, where its rules would sum in NCCL, and the baseline refused there.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/format.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "testing/problem_data.h"

namespace tpgemm {
namespace {

constexpr int kCalls = 100;

class Determinism : public ::testing::TestWithParam<int> {};

TEST_P(Determinism, EveryOwnReductionGivesTheSameBitsEveryCallAndEveryPlan) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              Stream stream = Stream::create();
              const cudaStream_t st = stream.get();
              struct Case { Op op; Impl impl; int64_t m; bool deterministic = false; };
              // M in whole 256-row tiles per rank, so that the fused reductions take it too.
              const int64_t m = 256 * W;
              const Case cases[] = {{Op::kGemmRs, Impl::kPipelinedCE, m},    {Op::kGemmRs, Impl::kFused, m},
                                    {Op::kGemmRs, Impl::kGemmReduceScatter, m}, {Op::kGemmAr, Impl::kPipelinedCE, m},
                                    {Op::kGemmAr, Impl::kGemmOneShot, m},     {Op::kGemmAr, Impl::kGemmTwoShot, m},
                                    {Op::kGemmAr, Impl::kFused, m},           {Op::kGemmAr, Impl::kFused, 16},
                                    {Op::kGemmAr, Impl::kAuto, 3},            {Op::kGemmRs, Impl::kAuto, 8 * W, true},
                                    {Op::kGemmAr, Impl::kAuto, 8 * W, true},  {Op::kGemmAr, Impl::kAuto, 1, true}};
              for (const Case& c : cases) {
                GemmProblem p;
                p.op = c.op;
                p.m = c.m, p.n = 1032, p.k = 776;
                PlanOptions o;
                o.impl = c.impl;
                o.tune = PlanOptions::Tune::kOff;  // auto: the rules' choice, the same in both plans
                o.deterministic = c.deterministic;
                if (c.deterministic) {
                  PlanOptions nccl = o;
                  nccl.impl = Impl::kBaseline;
                  const Status s = Plan::can_implement(team, p, nccl);
                  RANK_EXPECT(s.code == ErrorCode::kUnsupported && s.message.find("deterministic") != std::string::npos,
                              "%s: the baseline under deterministic: %s", describe(p).c_str(), s.message.c_str());
                }
                const Status servable = Plan::can_implement(team, p, o);
                RANK_EXPECT(servable.ok() || !c.deterministic, "%s deterministic: %s", describe(p).c_str(), servable.message.c_str());
                if (!servable.ok()) continue;
                const std::string what =
                    describe(p) + " impl=" + std::string(to_string(c.impl)) + (c.deterministic ? " deterministic" : "");
                const Status s = testsupport::caught([&] {
                  testing::RankData data(p, W, team.rank(), 321, st);
                  const size_t bytes = static_cast<size_t>(operand_sizes(p, W).d) * dtype_size(d_dtype(p));
                  uint64_t first = 0;
                  int differing = 0;
                  for (int made = 0; made < 2; ++made) {  // the second plan: made again, same operands
                    Plan plan(team, p, o);
                    RANK_EXPECT(!c.deterministic || plan.impl() != Impl::kBaseline, "%s: deterministic ran the baseline",
                                what.c_str());
                    for (int i = 0; i < kCalls; ++i) {
                      TPGEMM_CUDA_CHECK(cudaMemsetAsync(data.d.get(), 0xff, bytes, st));
                      plan.run(data.operands(), st);
                      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                      team.check();
                      const uint64_t h = testsupport::hash_device_bytes(data.d.get(), bytes);
                      if (made == 0 && i == 0) first = h;
                      differing += h != first;
                    }
                  }
                  RANK_EXPECT(differing == 0, "%s: %d of %d calls gave other bits than the first", what.c_str(),
                              differing, 2 * kCalls);
                });
                RANK_EXPECT(s.ok(), "%s: %s", what.c_str(), s.message.c_str());
              }
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(W, Determinism, ::testing::Values(2, 4, 8), [](const auto& info) { return strfmt("W%d", info.param); });

}  // namespace
}  // namespace tpgemm
