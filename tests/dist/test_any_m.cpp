// W = 2 and 4 ranks: one plan serving calls of any M (Operands::m), and calls of an M it cannot
// serve failing on every rank.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "testing/problem_data.h"
#include "testing/testing.h"
#include "dist/ops_cases.h"

namespace tpgemm {
namespace {

using testsupport::describe_check;

// Operands::m: one plan, made for the largest M, serves calls of fewer rows, each checked against
// the reference of its own M with nothing of D beyond it written; the gemm_ar plan from one row
// (fewer than the ranks) up, in a CUDA graph too. The implementations that take any M by name
// (pipelined_ce: NOTE [pipelined calls of fewer rows]), and auto (whose ranges choose among them).
TEST_P(Dist, OnePlanServesCallsOfAnyM) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 3000;
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
                GemmProblem p;
                p.op = op;
                p.n = 136;
                p.k = 200;
                p.m = op == Op::kGemmAr ? 16384 : 512 * W;
                const std::vector<int64_t> ms =
                    op == Op::kGemmAr ? std::vector<int64_t>{1, 2, 3, 512, 16384, 700, 1}
                                      : std::vector<int64_t>{int64_t(W), 3 * int64_t(W), 512 * int64_t(W), 37 * int64_t(W), int64_t(W)};
                std::vector<Impl> impls = {Impl::kAuto, Impl::kBaseline, Impl::kPipelinedCE};
                if (op == Op::kGemmAr) impls.insert(impls.end(), {Impl::kGemmOneShot, Impl::kGemmTwoShot});
                if (op == Op::kGemmRs) impls.push_back(Impl::kGemmReduceScatter);
                if (op == Op::kAgGemm) impls.push_back(Impl::kAllGatherGemm);
                for (Impl impl : impls)
                  for (int variant : {0, 1}) {
                    GemmProblem q = p;
                    if (variant == 1) q.l = 2, q.alpha = 0.5f, q.beta = -1.25f, q.has_c = true;
                    PlanOptions o;
                    o.impl = impl;
                    const auto c = testsupport::check_calls_of_m(team, q, o, ms, seed += 100);
                    RANK_EXPECT(c.ok, "%s", describe_check(q, o, c).c_str());
                  }
                PlanOptions o;  // auto, each M prepared and replayed from a CUDA graph
                const auto g = testsupport::check_calls_of_m(team, p, o, ms, seed += 100, /*graph=*/true);
                RANK_EXPECT(g.ok, "graph: %s", describe_check(p, o, g).c_str());
              }
            }),
            0);
}

// Calls a plan cannot serve: an error on every rank that names the value and the limit, and D
// untouched; the plan serves the next good call.
TEST_P(Dist, CallsOfAnUnservableMFailOnEveryRank) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              GemmProblem p;
              p.op = Op::kGemmRs;
              p.m = 256 * W;
              p.n = 136;
              p.k = 200;
              const auto expect_error = [&](Plan& plan, int64_t m, ErrorCode code, const char* says) {
                Stream stream = Stream::create();
                testing::RankData data(p, W, team.rank(), 9, stream.get());
                testing::poison(data.d.get(), operand_sizes(p, W).d, d_dtype(p), stream.get());
                Operands o = data.operands();
                o.m = m;
                const Status s = testsupport::caught([&] { plan.run(o, stream.get()); });
                RANK_EXPECT(s.code == code && s.message.find(says) != std::string::npos,
                            "M=%lld: expected error %d saying \"%s\", got %d: %s", (long long)m, static_cast<int>(code), says,
                            static_cast<int>(s.code), s.message.c_str());
                const int64_t count = operand_sizes(p, W).d;  // D: still all poison (NaN)
                DeviceBuffer zeros(static_cast<size_t>(count) * sizeof(float));
                TPGEMM_CUDA_CHECK(cudaMemsetAsync(zeros.get(), 0, zeros.bytes(), stream.get()));
                const testing::Diff d = testing::compare(data.d.get(), d_dtype(p), zeros.as<float>(), 1, count, count, count, 0, stream.get());
                RANK_EXPECT(d.nonfinite == count, "M=%lld: the failed call wrote %lld elements of D", (long long)m,
                            (long long)(count - d.nonfinite));
              };
              Plan any(team, p, {});
              expect_error(any, p.m + W, ErrorCode::kInvalidArgument, "Operands::m");
              expect_error(any, W + 1, ErrorCode::kInvalidArgument, "multiple of W");
              // A different M on each rank (the harness checks calls collectively): every rank
              // hears of it before anything runs.
              expect_error(any, team.rank() == 0 ? W : 2 * W, ErrorCode::kInvalidArgument, "different collective calls");
              // A protocol setting changed on one rank since the plan was made: the new range's
              // implementations would read it, so every rank refuses the call. A switch set to 0
              // is the same as unset: plans still agree.
              if (team.rank() == W - 1) ::setenv("TPGEMM_PIPELINED_DIRECT", "1", 1);
              expect_error(any, 3 * W, ErrorCode::kInvalidArgument, "protocol settings changed");
              if (team.rank() == W - 1) ::setenv("TPGEMM_PIPELINED_DIRECT", "0", 1);
              PlanOptions pipelined;
              pipelined.impl = Impl::kPipelinedCE;
              Plan fixed(team, p, pipelined);
              ::unsetenv("TPGEMM_PIPELINED_DIRECT");
              expect_error(fixed, 2 * W, ErrorCode::kUnsupported, "runs only the plan's M");
              // Both plans still serve good calls.
              const auto c = testsupport::check_calls_of_m(team, p, {}, {int64_t(W), p.m}, 77);
              RANK_EXPECT(c.ok, "after the errors: %s", describe_check(p, {}, c).c_str());
            }),
            0);
}

// Making a plan and prepare() run on the team's GPU and give the caller's current device back,
// as run() does: a caller whose current device is another GPU (here the next rank's) finds that
// one current after each, and the plans then serve calls.
TEST_P(Dist, PlansAndPrepareLeaveTheCallersDeviceCurrent) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              const int other = (team.device() + 1) % W;
              const auto current = [] {
                int d = -1;
                TPGEMM_CUDA_CHECK(cudaGetDevice(&d));
                return d;
              };
              TPGEMM_CUDA_CHECK(cudaSetDevice(other));
              GemmProblem p;
              p.op = Op::kGemmAr;
              p.m = 512, p.n = 136, p.k = 200;
              Plan plan(team, p, {});
              RANK_EXPECT(current() == other, "after Plan(): device %d current, expected %d", current(), other);
              plan.prepare(3);
              RANK_EXPECT(current() == other, "after Plan::prepare(): device %d current, expected %d", current(), other);
              AllReducePlan ar(team, 1 << 16, DType::kBF16);
              RANK_EXPECT(current() == other, "after AllReducePlan(): device %d current, expected %d", current(), other);
              ar.prepare(1000);
              RANK_EXPECT(current() == other, "after AllReducePlan::prepare(): device %d current, expected %d", current(),
                          other);
              TPGEMM_CUDA_CHECK(cudaSetDevice(team.device()));
              const auto c = testsupport::check_calls_of_m(team, p, {}, {3, p.m}, 91);
              RANK_EXPECT(c.ok, "%s", describe_check(p, {}, c).c_str());
            }),
            0);
}

}  // namespace
}  // namespace tpgemm
