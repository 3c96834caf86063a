// A random soak: several plans alive at once, of random problems (shape, dtype, layout, batch,
// alpha, beta and C, shard dimension) and implementations (auto among them), called in a random
// interleaving, each call on fresh data with D poisoned and checked against the fp32 reference,
// and plans replaced as it goes (every 25 calls, at most a hundred times per op). The calls per
// op default to a bounded run for the dist suite; TPGEMM_SOAK_CALLS sets them (the long run:
// 10000), TPGEMM_SOAK_SEED the draw (printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "core/format.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "testing/problem_data.h"
#include "testing/testing.h"

namespace tpgemm {
namespace {

constexpr int kLivePlans = 6;       // alive at once, called in a random order
constexpr int kReplacements = 100;  // plan replacements per op at most (every 25 calls or more)
constexpr int kBoundedCalls = 40;   // per op, without TPGEMM_SOAK_CALLS

const std::vector<Impl>& impls_of(Op op) {
  static const std::vector<Impl> ag = {Impl::kAuto,         Impl::kBaseline,       Impl::kPipelinedCE,
                                       Impl::kFused,        Impl::kAllGatherGemm,  Impl::kNaiveRemote,
                                       Impl::kThreadloadGather, Impl::kGatherThenGemm};
  static const std::vector<Impl> rs = {Impl::kAuto, Impl::kBaseline, Impl::kPipelinedCE, Impl::kFused,
                                       Impl::kGemmReduceScatter};
  static const std::vector<Impl> ar = {Impl::kAuto,         Impl::kBaseline,     Impl::kPipelinedCE,
                                       Impl::kGemmOneShot,  Impl::kGemmTwoShot,  Impl::kFused};
  return op == Op::kAgGemm ? ag : op == Op::kGemmRs ? rs : ar;
}

// A random problem of `op` at W: small enough for the reference to keep up; a quarter of them
// in whole 256-row tiles per rank (the fused reductions take only those).
GemmProblem draw_problem(std::mt19937_64& rng, Op op, int W) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  GemmProblem p;
  p.op = op;
  p.m = pick(1, 1536);
  if (op != Op::kGemmAr || pick(0, 3) == 0) p.m = (p.m + W - 1) / W * W;
  if (pick(0, 3) == 0) p.m = W * 256 * pick(1, 2);
  p.n = 8 * pick(1, 160);
  p.k = 8 * pick(1, 160);
  p.l = pick(0, 4) == 0 ? 2 : 1;
  p.dtype = pick(0, 1) ? DType::kBF16 : DType::kFP16;
  p.b_layout = pick(0, 1) ? BLayout::kNK : BLayout::kKN;
  const float alphas[] = {1.0f, 0.5f, -2.0f}, betas[] = {1.0f, 0.25f, -1.5f};
  p.alpha = alphas[pick(0, 2)];
  p.has_c = pick(0, 2) == 0;
  p.beta = p.has_c ? betas[pick(0, 2)] : 0.0f;
  if (op != Op::kGemmAr && pick(0, 4) == 0) p.shard_dim = ShardDim::kN;
  if (p.shard_dim == ShardDim::kN) p.n = 8 * W * pick(1, 20);  // each rank's columns, multiples of 8
  return p;
}

struct Live {
  GemmProblem p;
  Impl impl = Impl::kAuto;
  std::unique_ptr<Plan> plan;
  std::unique_ptr<testing::RankData> data;
};

class Soak : public ::testing::TestWithParam<int> {};

TEST_P(Soak, InterleavedPlansOfRandomProblemsMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  const int calls = static_cast<int>(env_int("TPGEMM_SOAK_CALLS", 1, 100000000).value_or(kBoundedCalls));
  const uint64_t seed = static_cast<uint64_t>(
      env_int("TPGEMM_SOAK_SEED", 0, int64_t(1) << 62)
          .value_or(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007));
  std::printf("soak W=%d: %d calls per op, TPGEMM_SOAK_SEED=%llu\n", W, calls, (unsigned long long)seed);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              // Every rank draws the same sequence: the calls are collective.
              std::mt19937_64 rng(seed);
              Stream stream = Stream::create();
              const cudaStream_t st = stream.get();
              int64_t checked = 0, mismatches = 0, made = 0;
              uint64_t data_seed = seed * 7919;
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
                std::vector<Live> live(kLivePlans);
                // A new random problem and implementation for slot `i`, one the library accepts.
                auto replace = [&](Live& slot) {
                  slot.plan.reset();
                  slot.data.reset();
                  for (;;) {
                    slot.p = draw_problem(rng, op, W);
                    const auto& impls = impls_of(op);
                    slot.impl = impls[std::uniform_int_distribution<size_t>(0, impls.size() - 1)(rng)];
                    PlanOptions o;
                    o.impl = slot.impl;
                    if (!Plan::can_implement(team, slot.p, o).ok()) continue;
                    slot.plan = std::make_unique<Plan>(team, slot.p, o);
                    slot.data = std::make_unique<testing::RankData>(slot.p, W, team.rank(), ++data_seed, st);
                    ++made;
                    return;
                  }
                };
                for (Live& slot : live) replace(slot);
                const int replace_every = std::max(25, calls / kReplacements);
                for (int c = 0; c < calls; ++c) {
                  Live& slot = live[std::uniform_int_distribution<int>(0, kLivePlans - 1)(rng)];
                  if (c > 0 && c % replace_every == 0) replace(live[std::uniform_int_distribution<int>(0, kLivePlans - 1)(rng)]);
                  const uint64_t s = ++data_seed;
                  const int64_t d_count = operand_sizes(slot.p, W).d;
                  slot.data->refill(s, st);
                  testing::poison(slot.data->d.get(), d_count, d_dtype(slot.p), st);
                  const Status run = testsupport::caught([&] { slot.plan->run(slot.data->operands(), st); });
                  RANK_EXPECT(run.ok(), "call %d, %s impl=%s: %s", c, describe(slot.p).c_str(),
                              std::string(to_string(slot.impl)).c_str(), run.message.c_str());
                  if (!run.ok()) return;
                  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                  team.check();
                  const DeviceBuffer want = testing::expected_d(slot.p, W, team.rank(), s, testing::RefEngine::kNaive,
                                                                team.state()->lt, st);
                  const testing::Diff d = testing::compare_d(slot.data->d.get(), want, slot.p, W, st);
                  ++checked;
                  if (!d.passes(testing::default_eps(slot.p))) {
                    ++mismatches;
                    RANK_EXPECT(false, "call %d (TPGEMM_SOAK_SEED=%llu), %s impl=%s ran %s: rel_err %.3g, %lld non-finite",
                                c, (unsigned long long)seed, describe(slot.p).c_str(),
                                std::string(to_string(slot.impl)).c_str(),
                                std::string(to_string(slot.plan->impl())).c_str(), d.rel_err, (long long)d.nonfinite);
                  }
                }
              }
              if (team.rank() == 0)
                std::printf("soak W=%d: %lld calls checked, %lld plans made, %lld mismatches\n", W, (long long)checked,
                            (long long)made, (long long)mismatches);
            }, {}, 600 + calls / 10),  // a hang is a failure; a long run gets time in proportion
            0);
}

INSTANTIATE_TEST_SUITE_P(W, Soak, ::testing::Values(2, 3, 4, 8), [](const auto& info) { return strfmt("W%d", info.param); });

}  // namespace
}  // namespace tpgemm
