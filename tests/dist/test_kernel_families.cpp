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
              Stream stream = Stream::create();
              const cudaStream_t st = stream.get();
              constexpr int64_t kCount = 8 * 1000;
              for (AllReduceImpl impl : {AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot}) {
                const Status s = testsupport::caught([&] {
                  AllReducePlan plan(team, kCount, DType::kBF16, impl);
                  DeviceBuffer own(kCount * 2), out(kCount * 2), tmp(kCount * 2), ref(kCount * sizeof(float));
                  TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref.get(), 0, ref.bytes(), st));
                  for (int q = 0; q < W; ++q) {
                    testing::fill_random(tmp.get(), DType::kBF16, 1, 1, kCount, 0, 1, 91 + q, st);
                    testing::reference_add(ref.as<float>(), tmp.get(), 1.0f, kCount, DType::kBF16, st);
                  }
                  testing::fill_random(own.get(), DType::kBF16, 1, 1, kCount, 0, 1, 91 + team.rank(), st);
                  for (int rep = 0; rep < 2; ++rep) {
                    testing::poison(out.get(), kCount, DType::kBF16, st);
                    plan.run(own.get(), out.get(), st);
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                    team.check();
                    const auto d = testing::compare(out.get(), DType::kBF16, ref.as<float>(), 1, kCount, kCount, kCount, 0, st);
                    RANK_EXPECT(d.passes(testing::default_eps(DType::kBF16)), "allreduce %s rep %d: rel_err %.2e, %lld non-finite",
                                std::string(to_string(impl)).c_str(), rep, d.rel_err, (long long)d.nonfinite);
                  }
                });
                RANK_EXPECT(s.ok(), "allreduce %s: %s", std::string(to_string(impl)).c_str(), s.message.c_str());
              }
            }),
            0);
}

INSTANTIATE_TEST_SUITE_P(W, KernelFamilies, ::testing::Values(2, 4), [](const auto& info) { return "W" + std::to_string(info.param); });

}  // namespace
}  // namespace tpgemm
