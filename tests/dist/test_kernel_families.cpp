// Every kernel family of tpgemm's own, once each on a small problem, checked against the
// reference: the subset the sanitizers (compute-sanitizer memcheck, racecheck, synccheck) run
// over several processes (scripts/gpu_check.sh, stage sanitize). Small, so that racecheck, which
// tracks every shared-memory access, ends in minutes; two calls each, so both staging halves and
// the flags' epochs of the symmetric paths are used.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/format.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "testing/problem_data.h"
#include "testing/testing.h"

namespace tpgemm {
namespace {

using testsupport::check_plan;
using testsupport::describe_check;

struct Family {
  Op op;
  Impl impl;
  int64_t rows_per_rank;  // M = W * rows_per_rank (gemm_ar: M itself where below W * 128)
  int chunks = 0;         // PlanOptions::chunks_per_rank (0: the planner's)
  const char* env = nullptr;  // a protocol switch this family is selected by (NAME=VALUE)
};

// The GEMM families: the copy-engine pipeline (one piece and, for the ring of partials, several),
// the fused kernels (ag_gemm's pull of peer tiles in pieces; gemm_rs's and gemm_ar's push-and-
// reduce beside the GEMM; the decode kernel, one-shot and two-shot), the matmul-then-collective
// kernels, and the ladder's gathers.
std::vector<Family> families() {
  return {
      {Op::kAgGemm, Impl::kPipelinedCE, 256, 1},        {Op::kAgGemm, Impl::kPipelinedCE, 256, 2},
      {Op::kAgGemm, Impl::kFused, 256, 1},              {Op::kAgGemm, Impl::kFused, 256, 4},
      {Op::kAgGemm, Impl::kAllGatherGemm, 256},         {Op::kAgGemm, Impl::kThreadloadGather, 256},
      {Op::kAgGemm, Impl::kNaiveRemote, 256},           {Op::kAgGemm, Impl::kGatherThenGemm, 256},
      {Op::kGemmRs, Impl::kPipelinedCE, 256, 1},        {Op::kGemmRs, Impl::kPipelinedCE, 256, 2},
      {Op::kGemmRs, Impl::kFused, 256},                 {Op::kGemmRs, Impl::kGemmReduceScatter, 256},
      {Op::kGemmAr, Impl::kPipelinedCE, 256, 1},        {Op::kGemmAr, Impl::kPipelinedCE, 256, 2},
      {Op::kGemmAr, Impl::kGemmOneShot, 256},           {Op::kGemmAr, Impl::kGemmTwoShot, 256},
      {Op::kGemmAr, Impl::kFused, 256},                 {Op::kGemmAr, Impl::kFused, -16},
      {Op::kGemmAr, Impl::kFused, -16, 0, "TPGEMM_DECODE_TWO_SHOT=1"},
  };
}

class KernelFamilies : public ::testing::TestWithParam<int> {};

TEST_P(KernelFamilies, EachRunsOnASmallProblemAndMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 4100;
              for (const Family& f : families()) {
                GemmProblem p;
                p.op = f.op;
                p.m = f.rows_per_rank > 0 ? W * f.rows_per_rank : -f.rows_per_rank;  // negative: M itself
                p.n = 384;
                p.k = 256;
                PlanOptions o;
                o.impl = f.impl;
                o.chunks_per_rank = f.chunks;
                std::string name, value;
                if (f.env) {
                  const std::string kv(f.env);
                  name = kv.substr(0, kv.find('=')), value = kv.substr(kv.find('=') + 1);
                  ::setenv(name.c_str(), value.c_str(), 1);
                }
                const auto c = check_plan(team, p, o, 2, seed += 10);
                if (f.env) ::unsetenv(name.c_str());
                RANK_EXPECT(c.ok, "%s%s chunks %d: %s", f.env ? f.env : "", f.env ? " " : "", f.chunks,
                            describe_check(p, o, c).c_str());
              }
              // The symmetric all-reduce kernels alone, one-shot and two-shot, out of place.
              for (AllReduceImpl impl : {AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot}) {
                const std::string failed = testsupport::check_allreduce(team, 8 * 1000, DType::kBF16, impl, false, 2, 91);
                RANK_EXPECT(failed.empty(), "%s", failed.c_str());
              }
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(W, KernelFamilies, ::testing::Values(2, 4), [](const auto& info) { return strfmt("W%d", info.param); });

}  // namespace
}  // namespace tpgemm
