// W = 2 and 4 ranks: the fused kernels (AllGather+GEMM over waves and pieces and on its own rows,
// the tile reductions, the decode GEMM+AllReduce) against an fp32 reference.

#include <gtest/gtest.h>

#include <unistd.h>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/team_state.h"
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

using testsupport::check_plan;
using testsupport::describe_check;

// The fused kernel on a problem of several waves of tiles (so tiles of later blocks really wait,
// and the rotation wraps; pulled stage by stage) and on one of a single wave (pulled piece by
// piece across the stages), K split into 1 or 3 pieces, with and without C.
TEST_P(Dist, FusedAgGemmOverSeveralWavesAndPiecesMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 700;
              for (bool one_wave : {false, true})
                for (int pieces : {1, 3})
                  for (int variant : {0, 1}) {
                    GemmProblem p = problem(Op::kAgGemm, W, DType::kBF16, BLayout::kNK, variant);
                    p.m = W * (one_wave ? 120 : 1000);  // blocks end inside 128-row tiles
                    p.n = 2056;
                    p.k = one_wave ? 1000 : 264;  // 16 k-tiles (the last one partial), or 5
                    PlanOptions o;
                    o.impl = Impl::kFused;
                    o.chunks_per_rank = pieces;
                    const auto c = check_plan(team, p, o, 3, seed += 10);
                    RANK_EXPECT(c.ok, "%s", describe_check(p, o, c).c_str());
                  }
            }),
            0);
}

// NOTE [own rows in place] (TPGEMM_FUSED_AG_OWN_IN_PLACE=1): whole tile rows per rank, so the
// kernel reads its own rows from A while the copy engine still copies them into G for the peers;
// one wave and several, 1 or 3 pieces, with and without batches and C, three calls each, one case
// replayed from a CUDA graph; and a block that ends inside a tile row, where the plan keeps the copy.
TEST_P(Dist, FusedAgGemmReadingItsOwnRowsInPlaceMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              ::setenv("TPGEMM_FUSED_AG_OWN_IN_PLACE", "1", 1);
              uint64_t seed = 900;
              for (int rows : {128, 1024, 120})
                for (int pieces : {1, 3})
                  for (int variant : {0, 1}) {
                    GemmProblem p = problem(Op::kAgGemm, W, DType::kBF16, BLayout::kNK, variant);
                    p.m = W * rows;
                    p.n = 2056;
                    p.k = rows == 1024 ? 264 : 1000;
                    PlanOptions o;
                    o.impl = Impl::kFused;
                    o.chunks_per_rank = pieces;
                    const bool graph = rows == 128 && pieces == 3 && variant == 1;
                    const auto c = check_plan(team, p, o, 3, seed += 10, graph);
                    RANK_EXPECT(c.ok, "TPGEMM_FUSED_AG_OWN_IN_PLACE=1 %s%s", describe_check(p, o, c).c_str(),
                                graph ? " (graph)" : "");
                  }
              ::unsetenv("TPGEMM_FUSED_AG_OWN_IN_PLACE");
            }),
            0);
}

// The fused gemm_rs and gemm_ar over several waves of tiles (the reduction beside the GEMM really
// waits for tiles, and the tail launch takes what is left), tile columns that end inside N,
// batches and C, with the reduction given 1 or 8 SMs beside the GEMM, in units of 8 and 1 tiles
// (TPGEMM_TILE_GROUP) and of the kernel's own choice; three calls each (the flags' epochs, and
// both staging halves). gemm_ar also at an M whose tile rows do not divide among the ranks and
// whose last one is cut short (NOTE [tile all-reduce]).
TEST_P(Dist, FusedReductionsOverSeveralWavesMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 1300;
              for (const char* group : {"8", "1", ""}) {
                if (*group != 0) ::setenv("TPGEMM_TILE_GROUP", group, 1);
                else ::unsetenv("TPGEMM_TILE_GROUP");  // the kernel's choice
                for (const auto& [op, m] : {std::pair{Op::kGemmRs, W * 1024}, std::pair{Op::kGemmAr, W * 1024},
                                            std::pair{Op::kGemmAr, W * 1024 + 3 * 128 + 77}})
                  for (int comm_sms : {1, 8})
                    for (int variant : {0, 1}) {
                      GemmProblem p = problem(op, W, DType::kBF16, BLayout::kNK, variant, Impl::kFused);
                      p.m = m;  // W x 8 tile rows (and more) by 9 tile columns: more tiles than SMs
                      p.n = 2056;
                      p.k = 264;
                      PlanOptions o;
                      o.impl = Impl::kFused;
                      o.comm_sms = comm_sms;
                      const auto c = check_plan(team, p, o, 3, seed += 10);
                      RANK_EXPECT(c.ok, "tiles per unit '%s': %s", group, describe_check(p, o, c).c_str());
                    }
              }
            }),
            0);
}

// fused gemm_ar's decode path (NOTE [fused decode]): tiles of 16 rows (M = 16, 48), 32, 64 and
// 128 (M = 128; 256 at W=4, whole tiles per rank at W=2), one tile per block and several (M = 48,
// 768 tiles, and M = 64 and 128 without C, 1024 tiles: more than fit on an H100 at once);
// batches, C, both 16-bit types, K = 2560, 320, 128 and 64 (40, 5, 2 and 1 k-tiles: more and
// fewer than the ring loads ahead); three calls each (both staging halves), directly and (bf16)
// from CUDA graph replays; with the one-shot exchange and the two-shot one
// (TPGEMM_DECODE_TWO_SHOT=1).
TEST_P(Dist, FusedDecodeGemmAllReduceMatchesTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              uint64_t seed = 1900;
              for (const char* two_shot : {"0", "1"})
                for (int64_t m : {16, 32, 48, 64, 128, 256})
                  for (DType dt : {DType::kBF16, DType::kFP16})
                    for (int variant : {0, 1})
                      for (bool graph : {false, true}) {
                        if (graph && (dt != DType::kBF16 || variant != 0)) continue;  // replays: bf16 alone
                        GemmProblem p = problem(Op::kGemmAr, W, dt, BLayout::kNK, variant, Impl::kFused);
                        p.m = m;
                        p.n = m == 48                                 ? 16384
                              : (m == 64 || m == 128) && variant == 0 ? 65536
                              : m == 256                              ? 2048
                                                                      : 1088;
                        p.k = m == 32 ? 128 : m == 16 && variant == 1 ? 64 : variant == 1 ? 320 : 2560;
                        PlanOptions o;
                        o.impl = Impl::kFused;
                        ::setenv("TPGEMM_DECODE_TWO_SHOT", two_shot, 1);
                        const auto c = check_plan(team, p, o, 3, seed += 10, graph);
                        ::unsetenv("TPGEMM_DECODE_TWO_SHOT");
                        RANK_EXPECT(c.ok, "%s%s%s", *two_shot == '1' ? "two-shot: " : "", graph ? "graph replay: " : "",
                                    describe_check(p, o, c).c_str());
                      }
            }),
            0);
}

// The decode kernel's staging halves are reused every other call (NOTE [fused decode]): calls
// enqueued back to back, with no host synchronisation between them and rank 1 enqueuing late,
// each on fresh data and each D copied aside, must all match their references; both exchanges.
TEST_P(Dist, FusedDecodeBackToBackCallsMatchTheReference) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              for (const char* two_shot : {"0", "1"}) {
                GemmProblem p = problem(Op::kGemmAr, W, DType::kBF16, BLayout::kNK, 0, Impl::kFused);
                p.m = 32;
                p.n = 8192;
                p.k = 512;
                PlanOptions o;
                o.impl = Impl::kFused;
                ::setenv("TPGEMM_DECODE_TWO_SHOT", two_shot, 1);
                const Status s = testsupport::caught([&] {
                  Stream stream = Stream::create();
                  Plan plan(team, p, o);
                  testing::RankData data(p, team.world_size(), team.rank(), 2100, stream.get());
                  const int64_t d_count = operand_sizes(p, team.world_size()).d;
                  const size_t d_bytes = static_cast<size_t>(d_count) * dtype_size(d_dtype(p));
                  constexpr int kCalls = 6;
                  std::vector<DeviceBuffer> kept;
                  for (int i = 0; i < kCalls; ++i) {
                    kept.emplace_back(d_bytes);
                    data.refill(2100 + i, stream.get());
                    testing::poison(data.d.get(), d_count, d_dtype(p), stream.get());
                    if (team.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                    plan.run(data.operands(), stream.get());
                    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(kept.back().get(), data.d.get(), d_bytes, cudaMemcpyDeviceToDevice,
                                                      stream.get()));
                  }
                  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
                  team.check();
                  for (int i = 0; i < kCalls; ++i) {
                    const DeviceBuffer want = testing::expected_d(p, team.world_size(), team.rank(), 2100 + i,
                                                                  testing::RefEngine::kNaive, team.state()->lt, stream.get());
                    const testing::Diff d = testing::compare_d(kept[i].get(), want, p, team.world_size(), stream.get());
                    RANK_EXPECT(d.passes(testing::default_eps(p)), "two-shot=%s, call %d of %d: rel_err %.2e, %lld non-finite",
                                two_shot, i, kCalls, d.rel_err, static_cast<long long>(d.nonfinite));
                  }
                });
                ::unsetenv("TPGEMM_DECODE_TWO_SHOT");
                RANK_EXPECT(s.ok(), "two-shot=%s: %s", two_shot, s.message.c_str());
              }
            }),
            0);
}

}  // namespace
}  // namespace tpgemm
