// Bad input on several ranks: a clear tpgemm::Error on every rank, no hang, and nothing of the
// caller's overwritten. And bounded waits: a rank that never signals makes its peers time out
// with an error naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>

#include "comm/launcher.h"
#include "comm/team_state.h"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "testing/problem_data.h"
#include "testing/testing.h"
#include "tpgemm/allreduce.h"

namespace tpgemm {
namespace {

using testsupport::caught;

bool has(const Status& s, const std::string& w) { return s.message.find(w) != std::string::npos; }

GemmProblem small(Op op) {
  GemmProblem p;
  p.op = op;
  p.m = 512;
  p.n = 256;
  p.k = 128;
  return p;
}

TEST(DistErrors, MNotDivisibleByTheWorldFailsOnEveryRank) {
  TPGEMM_REQUIRE_GPUS(4);
  EXPECT_EQ(testsupport::run_on_ranks(4, [](const Team& team) {
              for (Op op : {Op::kAgGemm, Op::kGemmRs}) {
                GemmProblem p = small(op);
                p.m = 1022;
                const Status s = caught([&] { Plan plan(team, p); });
                RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "M=1022") && has(s, "W=4"), "%s", s.message.c_str());
              }
            }),
            0);
}

TEST(DistErrors, ShapesOrDtypesThatDifferAcrossRanksFailOnEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              GemmProblem p = small(Op::kGemmRs);
              if (team.rank() == 1) p.n += 8;
              Status s = caught([&] { Plan plan(team, p); });
              RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "disagree") && has(s, "rank 1"), "%s", s.message.c_str());
              p = small(Op::kAgGemm);
              if (team.rank() == 0) p.dtype = DType::kFP16;
              s = caught([&] { Plan plan(team, p); });
              RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "fp16"), "%s", s.message.c_str());
              // The team is still usable afterwards.
              const auto c = testsupport::check_plan(team, small(Op::kAgGemm), {}, 1, 5);
              RANK_EXPECT(c.ok, "after the errors: %s", c.status.message.c_str());
            }),
            0);
}

// fused's kernels need a cluster of 2 SMs beside the comm_sms they leave free: asking for all but
// one fails at plan time, on every rank, naming the option; the team stays usable.
TEST(DistErrors, FusedWithTooFewSmsLeftFailsOnEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
                PlanOptions o;
                o.impl = Impl::kFused;
                o.comm_sms = team.state()->num_sms - 1;
                const Status s = caught([&] { Plan plan(team, small(op), o); });
                RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "comm_sms") && has(s, "fused"), "%s",
                            s.message.c_str());
                o.comm_sms = -1;
                const auto c = testsupport::check_plan(team, small(op), o, 1, 6);
                RANK_EXPECT(c.ok, "after the error: %s", c.status.message.c_str());
              }
            }),
            0);
}

// PlanOptions::matmul chooses pipelined_ce's matmuls only: with another implementation, or on a
// problem the Hopper core cannot take (FP8), every rank fails at plan time naming it.
TEST(DistErrors, MatmulChoiceOutsidePipelinedFailsOnEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              PlanOptions o;
              o.impl = Impl::kBaseline;
              o.matmul = Matmul::kSm90;
              Status s = caught([&] { Plan plan(team, small(Op::kGemmRs), o); });
              RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "matmul=sm90") && has(s, "baseline"), "%s",
                          s.message.c_str());
              GemmProblem fp8 = small(Op::kGemmRs);
              fp8.dtype = DType::kE4M3;
              fp8.out_dtype = DType::kBF16;
              fp8.k = 256;
              o.impl = Impl::kPipelinedCE;
              s = caught([&] { Plan plan(team, fp8, o); });
              RANK_EXPECT(s.code == ErrorCode::kUnsupported && has(s, "matmul=sm90") && has(s, "e4m3"), "%s",
                          s.message.c_str());
              o.matmul = Matmul::kCublasLt;
              const auto c = testsupport::check_plan(team, small(Op::kGemmRs), o, 1, 7);
              RANK_EXPECT(c.ok, "after the errors: %s", c.status.message.c_str());
            }),
            0);
}

// NOTE [agreement]: rank 1 alone fails (a test hook), between two of the plan's collective steps
// (before the symmetric collective's own agree): every rank throws, at once, and the team stays
// usable. Before, rank 0 waited in a collective rank 1 never joined.
TEST(DistErrors, ARankFailingBetweenTwoCollectiveStepsStopsEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  ASSERT_TRUE(comm::test_hooks_compiled()) << "the library was built without TPGEMM_TEST_HOOKS: configure with "
                                              "-DTPGEMM_TEST_HOOKS=ON (the default with the tests)";
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              if (team.rank() == 1) ::setenv("TPGEMM_TEST_FAIL_SETUP_RANK", "1", 1);
              Status s = caught([&] { AllReducePlan plan(team, 1 << 20, DType::kBF16, AllReduceImpl::kOneShot); });
              const ErrorCode want = team.rank() == 1 ? ErrorCode::kInternal : ErrorCode::kPeerFailure;
              RANK_EXPECT(s.code == want && has(s, "TPGEMM_TEST_FAIL_SETUP_RANK") && (team.rank() == 1 || has(s, "rank 1")),
                          "%s", s.message.c_str());
              PlanOptions o;
              o.impl = Impl::kGemmOneShot;
              s = caught([&] { Plan plan(team, small(Op::kGemmAr), o); });
              RANK_EXPECT(!s.ok() && has(s, "TPGEMM_TEST_FAIL_SETUP_RANK"), "%s", s.message.c_str());
              ::unsetenv("TPGEMM_TEST_FAIL_SETUP_RANK");
              const auto c = testsupport::check_plan(team, small(Op::kGemmAr), o, 1, 7);
              RANK_EXPECT(c.ok, "after the errors: %s", c.status.message.c_str());
            }),
            0);
}

// A setting that changes what ranks exchange (here the collective's threads per block), set on
// one rank only: the plans' descriptions differ, so every rank refuses, naming the setting.
TEST(DistErrors, AProtocolSettingOnOneRankOnlyFailsOnEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              if (team.rank() == 1) ::setenv("TPGEMM_SYMM_THREADS", "abc", 1);
              Status s = caught([&] { AllReducePlan plan(team, 1 << 20, DType::kBF16, AllReduceImpl::kOneShot); });
              RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "TPGEMM_SYMM_THREADS=abc") && has(s, "rank 1"),
                          "%s", s.message.c_str());
              ::unsetenv("TPGEMM_SYMM_THREADS");
              PlanOptions o;
              o.impl = Impl::kGemmOneShot;
              const auto c = testsupport::check_plan(team, small(Op::kGemmAr), o, 1, 7);
              RANK_EXPECT(c.ok, "after the error: %s", c.status.message.c_str());
            }),
            0);
}

TEST(DistErrors, UnsupportedDtypeOrLayoutFailsOnEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              GemmProblem p = small(Op::kGemmAr);
              p.dtype = static_cast<DType>(9);
              Status s = caught([&] { Plan plan(team, p); });
              RANK_EXPECT(s.code == ErrorCode::kUnsupported && has(s, "dtype 9"), "%s", s.message.c_str());
              p = small(Op::kGemmAr);
              p.b_layout = static_cast<BLayout>(5);
              s = caught([&] { Plan plan(team, p); });
              RANK_EXPECT(s.code == ErrorCode::kUnsupported && has(s, "layout 5"), "%s", s.message.c_str());
              PlanOptions o;
              o.impl = Impl::kGemmOneShot;
              s = caught([&] { Plan plan(team, small(Op::kAgGemm), o); });
              RANK_EXPECT(s.code == ErrorCode::kUnsupported && has(s, "gemm_ar only"), "%s", s.message.c_str());
            }),
            0);
}

// One rank passes a bad pointer: that rank gets InvalidArgument, every other rank PeerFailure
// naming it, in the same call; nobody enqueues anything, so every D keeps its contents.
TEST(DistErrors, ABadPointerOnOneRankStopsEveryRankAndWritesNothing) {
  TPGEMM_REQUIRE_GPUS(4);
  EXPECT_EQ(testsupport::run_on_ranks(4, [](const Team& team) {
              Stream stream = Stream::create();
              for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
                for (Impl impl : {Impl::kBaseline, Impl::kPipelinedCE})
                  for (int kind : {0, 1, 2}) {  // 0: null A on rank 1; 1: misaligned D on rank 2; 2: host B on rank 3
                    const GemmProblem p = small(op);
                    PlanOptions o;
                    o.impl = impl;
                    Plan plan(team, p, o);
                    testing::RankData data(p, team.world_size(), team.rank(), 3, stream.get());
                    const int64_t n = operand_sizes(p, team.world_size()).d;
                    testing::poison(data.d.get(), n, d_dtype(p), stream.get());
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
                    Operands ops = data.operands();
                    const int bad = kind + 1;
                    std::vector<uint16_t> host_b(static_cast<size_t>(operand_sizes(p, team.world_size()).b) + 8);
                    if (team.rank() == bad) {
                      if (kind == 0) ops.a = nullptr;
                      else if (kind == 1) ops.d = static_cast<char*>(ops.d) + 2;
                      else ops.b = reinterpret_cast<const void*>((reinterpret_cast<uintptr_t>(host_b.data()) + 15) / 16 * 16);
                    }
                    const Status s = caught([&] { plan.run(ops, stream.get()); });
                    if (team.rank() == bad)
                      RANK_EXPECT(s.code == ErrorCode::kInvalidArgument &&
                                      has(s, kind == 0 ? "A is null" : kind == 1 ? "16-byte" : "is host memory"),
                                  "%s", s.message.c_str());
                    else
                      RANK_EXPECT(s.code == ErrorCode::kPeerFailure && has(s, "rank " + std::to_string(bad)), "%s",
                                  s.message.c_str());
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
                    std::vector<uint16_t> host(static_cast<size_t>(n));
                    TPGEMM_CUDA_CHECK(cudaMemcpy(host.data(), data.d.get(), host.size() * 2, cudaMemcpyDeviceToHost));
                    size_t written = 0;
                    for (uint16_t v : host) written += v != 0xFFFF;
                    RANK_EXPECT(written == 0, "%zu elements of D written by a rejected call", written);
                  }
              // Still usable: the next good call works everywhere.
              const auto c = testsupport::check_plan(team, small(Op::kGemmRs), {}, 1, 8);
              RANK_EXPECT(c.ok, "after the errors: %s", c.status.message.c_str());
            }),
            0);
}

// A stream of another GPU would fail the call's launches after its peers committed to it: the
// rank refuses it, and (calls checked collectively) every rank stops in the same call.
TEST(DistErrors, AStreamOfAnotherGpuStopsEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              const GemmProblem p = small(Op::kGemmRs);
              Plan plan(team, p);
              Stream own = Stream::create();
              testing::RankData data(p, 2, team.rank(), 4, own.get());
              TPGEMM_CUDA_CHECK(cudaStreamSynchronize(own.get()));
              const int other_gpu = 1 - team.device();
              Stream other;
              {
                const DeviceScope there(other_gpu);
                other = Stream::create();
              }
              const Status s = caught([&] { plan.run(data.operands(), team.rank() == 1 ? other.get() : own.get()); });
              if (team.rank() == 1)
                RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "belongs to GPU"), "%s", s.message.c_str());
              else
                RANK_EXPECT(s.code == ErrorCode::kPeerFailure && has(s, "rank 1"), "%s", s.message.c_str());
              const auto c = testsupport::check_plan(team, p, {}, 1, 8);  // still usable
              RANK_EXPECT(c.ok, "after the error: %s", c.status.message.c_str());
            }),
            0);
}

TEST(DistErrors, MoreGpusThanExistIsAClearError) {
  TPGEMM_REQUIRE_GPUS(1);
  const int count = testsupport::local_gpus().count;
  ncclUniqueId id;
  TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
  EXPECT_EQ(comm::run_workers(1, [&](int) {
              const Status s = caught([&] { Team::from_unique_id(id, 0, 1, count); });
              const bool ok = s.code == ErrorCode::kInvalidArgument && has(s, "device " + std::to_string(count)) &&
                              has(s, std::to_string(count) + " CUDA device");
              if (!ok) std::fprintf(stderr, "got: %s\n", s.message.c_str());
              return ok ? 0 : 1;
            }),
            0);
}

// Without P2P, NCCL's LSA team shrinks: the symmetric-memory implementations refuse on every
// rank, naming the reason, and the baseline still runs.
TEST(DistErrors, WithoutP2PTheSymmetricPathsRefuseAndTheBaselineRuns) {
  TPGEMM_REQUIRE_GPUS(2);
  ::setenv("NCCL_P2P_DISABLE", "1", 1);
  const int rc = testsupport::run_on_ranks(2, [](const Team& team) {
    if (team.all_lsa_peers()) {
      std::fprintf(stderr, "[rank %d] NOTE: NCCL_P2P_DISABLE=1 left an LSA team of %d: the no-P2P refusal was not exercised\n",
                   team.rank(), team.lsa_size());
      return;
    }
    PlanOptions o;
    o.impl = Impl::kPipelinedCE;
    const Status s = caught([&] { Plan plan(team, small(Op::kGemmRs), o); });
    RANK_EXPECT(s.code == ErrorCode::kUnsupported && has(s, "LSA"), "%s", s.message.c_str());
    const auto c = testsupport::check_plan(team, small(Op::kGemmRs), {}, 1, 9);
    RANK_EXPECT(c.ok && c.ran == Impl::kBaseline, "auto without P2P: %s", c.status.message.c_str());
  });
  ::unsetenv("NCCL_P2P_DISABLE");
  EXPECT_EQ(rc, 0);
}

// Two ranks, rank 1 silent (test hook TPGEMM_TEST_DROP_SIGNALS_RANK: it joins no barrier and
// raises no flag; what it pushes, its peer never waits for). `call(team, stream)` builds and runs one plan and leaves it
// (and its operands) alive: a rank exits without destroying anything of a failed team. Rank 0's
// bounded waits must end in Error(Timeout) naming rank 1, within the configured time, and
// nothing hangs.
void expect_rank0_times_out_naming_rank1(const std::string& what, const std::function<void(const Team&, cudaStream_t)>& call) {
  ASSERT_TRUE(comm::test_hooks_compiled()) << "the library was built without TPGEMM_TEST_HOOKS: configure with "
                                              "-DTPGEMM_TEST_HOOKS=ON (the default with the tests)";
  ::setenv("TPGEMM_TEST_DROP_SIGNALS_RANK", "1", 1);
  TeamOptions to;
  to.timeout_ms = 1000;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = testsupport::run_on_ranks(2, [&](const Team& team) {
    Stream stream = Stream::create();
    const Status s = caught([&] {
      call(team, stream.get());
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      team.check();
    });
    if (team.rank() == 0)
      RANK_EXPECT(s.code == ErrorCode::kTimeout && has(s, "rank 0 waited") && has(s, "for rank 1"), "%s: %s", what.c_str(),
                  s.message.c_str());
    // Leave without tearing NCCL down: a failed team is abandoned, not finalised with peers.
    std::fflush(stderr);
    std::_Exit(testsupport::rank_failures() == 0 ? 0 : 1);
  }, to);
  ::unsetenv("TPGEMM_TEST_DROP_SIGNALS_RANK");
  EXPECT_EQ(rc, 0) << what;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)) << what;
}

TEST(DistErrors, ARankThatSkipsItsStepMakesPeersTimeOutNamingIt) {
  TPGEMM_REQUIRE_GPUS(2);
  struct Case {
    Op op;
    Impl impl;
    int chunks;  // 0: the planner's; pipelined gemm_rs / gemm_ar in 2: the ring of partials as C
  };
  for (auto [op, impl, chunks] : {Case{Op::kAgGemm, Impl::kPipelinedCE, 0}, Case{Op::kGemmRs, Impl::kPipelinedCE, 0},
                                  Case{Op::kGemmRs, Impl::kPipelinedCE, 2}, Case{Op::kGemmAr, Impl::kPipelinedCE, 2},
                                  Case{Op::kAgGemm, Impl::kFused, 0}, Case{Op::kGemmRs, Impl::kFused, 0},
                                  Case{Op::kGemmAr, Impl::kFused, 0}, Case{Op::kAgGemm, Impl::kNaiveRemote, 0},
                                  Case{Op::kAgGemm, Impl::kThreadloadGather, 0}, Case{Op::kAgGemm, Impl::kGatherThenGemm, 0},
                                  Case{Op::kGemmRs, Impl::kGemmReduceScatter, 0}, Case{Op::kAgGemm, Impl::kAllGatherGemm, 0}})
    expect_rank0_times_out_naming_rank1(strfmt("%s %s chunks=%d", std::string(to_string(op)).c_str(),
                                               std::string(to_string(impl)).c_str(), chunks),
                                        [op, impl, chunks](const Team& team, cudaStream_t st) {
      PlanOptions o;
      o.impl = impl;
      o.chunks_per_rank = chunks;
      const GemmProblem p = small(op);
      auto* plan = new Plan(team, p, o);  // left alive (see above)
      auto* data = new testing::RankData(p, team.world_size(), team.rank(), 4, st);
      plan->run(data->operands(), st);
    });
}

// NOTE [refused alone]: checked locally, rank 1 refuses a call (no D) that rank 0 runs. Rank 1's
// team fails there (its next call refuses, naming the first), and rank 0's call, whose partner
// never comes, ends in a Timeout naming rank 1: neither pairs a call with the other's next.
TEST(DistErrors, ACallRefusedOnOneRankAloneFailsTheTeamThereAndItsPeerTimesOut) {
  TPGEMM_REQUIRE_GPUS(2);
  TeamOptions to;
  to.call_check = TeamOptions::CallCheck::kLocal;
  to.timeout_ms = 2000;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = testsupport::run_on_ranks(2, [](const Team& team) {
    Stream stream = Stream::create();
    const cudaStream_t st = stream.get();
    PlanOptions o;
    o.impl = Impl::kGemmOneShot;
    const GemmProblem p = small(Op::kGemmAr);
    auto* plan = new Plan(team, p, o);  // left alive: a failed team is abandoned, not torn down with peers
    auto* data = new testing::RankData(p, team.world_size(), team.rank(), 5, st);
    const Status first = caught([&] {
      plan->run(data->operands(), st);
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
      team.check();
    });
    RANK_EXPECT(first.ok(), "the first call, good on both ranks: %s", first.message.c_str());
    if (team.rank() == 1) {
      Operands bad = data->operands();
      bad.d = nullptr;
      const Status refused = caught([&] { plan->run(bad, st); });
      RANK_EXPECT(refused.code == ErrorCode::kInvalidArgument && has(refused, "D is null"), "%s", refused.message.c_str());
      const Status next = caught([&] { plan->run(data->operands(), st); });
      RANK_EXPECT(next.code == ErrorCode::kInvalidArgument && has(next, "refused a call on this rank"), "%s",
                  next.message.c_str());
    } else {
      const Status lone = caught([&] {
        plan->run(data->operands(), st);
        TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
        team.check();
      });
      RANK_EXPECT(lone.code == ErrorCode::kTimeout && has(lone, "for rank 1"), "%s", lone.message.c_str());
    }
    std::fflush(stderr);
    std::_Exit(testsupport::rank_failures() == 0 ? 0 : 1);
  }, to, 90);
  EXPECT_EQ(rc, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

// NOTE [failed team]: rank 1 leaves after a plan with symmetric windows is made; rank 0's next
// plan's exchange times out (the host bound), and rank 0 then tears its plan and team down as any
// caller would, with destructors: within a bound, no free or deregistration waiting for rank 1.
TEST(DistErrors, ATeamWhoseExchangeTimedOutTearsDownWithoutHanging) {
  TPGEMM_REQUIRE_GPUS(2);
  TeamOptions to;
  to.host_timeout_ms = 8000;  // (the team's creation too: two NCCL initialisations)
  to.timeout_ms = 1000;
  to.call_check = TeamOptions::CallCheck::kLocal;
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = testsupport::run_on_ranks(2, [](const Team& team) {
    PlanOptions o;
    o.impl = Impl::kGemmOneShot;
    const Plan with_windows(team, small(Op::kGemmAr), o);
    if (team.rank() == 1) {
      std::fflush(stderr);
      std::_Exit(0);  // gone, without a word
    }
    const Status s = caught([&] { Plan next(team, small(Op::kGemmRs)); });
    // (a Timeout naming the exchange; NCCL may see the lost peer first and say so instead)
    RANK_EXPECT(s.code == ErrorCode::kTimeout || s.code == ErrorCode::kNcclError, "%s", s.message.c_str());
    std::fprintf(stderr, "[rank 0] after rank 1 left: %s\n", s.message.c_str());
  }, to, 90);
  EXPECT_EQ(rc, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
}

// Calls checked locally: a call that makes part of a plan (a range of M, an all-reduce algorithm)
// is still collective. A rank whose call is bad takes part in that making with its verdict, so its
// peers stop at once with its error instead of waiting out the host bound for it.
TEST(DistErrors, ABadCallWherePeersMakePartOfThePlanStopsThemAtOnce) {
  TPGEMM_REQUIRE_GPUS(2);
  TeamOptions to;
  to.host_timeout_ms = 60000;
  to.call_check = TeamOptions::CallCheck::kLocal;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              Stream stream = Stream::create();
              const bool bad = team.rank() == 1;
              const auto expect_stop = [&](const Status& s, const char* call, const char* named) {
                if (bad)
                  RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, named), "%s: %s", call, s.message.c_str());
                else
                  RANK_EXPECT(s.code == ErrorCode::kPeerFailure && has(s, "rank 1"), "%s: %s", call, s.message.c_str());
              };
              // A gemm_ar plan for 16384 rows; a call of one row makes its range. Rank 1 passes no D.
              GemmProblem p = small(Op::kGemmAr);
              p.m = 16384;
              Plan plan(team, p);
              DeviceBuffer a(p.k * 2), b(p.n * p.k * 2), d(p.n * 2);
              Operands o{a.get(), b.get(), nullptr, bad ? nullptr : d.get(), nullptr, 1};
              expect_stop(caught([&] { plan.run(o, stream.get()); }), "Plan::run of one row", "D is null");
              // An all-reduce plan of 24 MB; a call of 64 elements makes its one-shot. Rank 1's
              // output is not 16-byte aligned.
              const int64_t count = int64_t(12) << 20;
              AllReducePlan ar(team, count, DType::kBF16);
              DeviceBuffer x(count * 2), y(count * 2 + 16);
              char* out = static_cast<char*>(y.get()) + (bad ? 2 : 0);
              expect_stop(caught([&] { ar.run(x.get(), out, 64, stream.get()); }), "AllReducePlan::run of 64", "aligned");
              // Both plans serve the next good call.
              team.barrier();
              const Status again = caught([&] {
                ar.run(x.get(), y.get(), 64, stream.get());
                TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
              });
              RANK_EXPECT(again.ok(), "the next all-reduce call: %s", again.message.c_str());
            }, to, 120),
            0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(40));
}

// fused gemm_ar's decode kernel: ranks that would exchange differently refuse on every rank.
TEST(DistErrors, DecodeExchangesThatDifferAcrossRanksFailOnEveryRank) {
  TPGEMM_REQUIRE_GPUS(2);
  EXPECT_EQ(testsupport::run_on_ranks(2, [](const Team& team) {
              ::setenv("TPGEMM_DECODE_TWO_SHOT", team.rank() == 1 ? "1" : "0", 1);
              GemmProblem p = small(Op::kGemmAr);
              p.m = 64;
              PlanOptions o;
              o.impl = Impl::kFused;
              const Status s = caught([&] { Plan plan(team, p, o); });
              ::unsetenv("TPGEMM_DECODE_TWO_SHOT");
              RANK_EXPECT(s.code == ErrorCode::kInvalidArgument && has(s, "disagree") && has(s, "TPGEMM_DECODE_TWO_SHOT=1"),
                          "%s", s.message.c_str());
              // The team is still usable afterwards.
              const auto c = testsupport::check_plan(team, p, o, 1, 7);
              RANK_EXPECT(c.ok, "after the error: %s", c.status.message.c_str());
            }),
            0);
}

// fused gemm_ar's decode kernel: its pushes are the data, as the all-reduce's below.
TEST(DistErrors, ARankThatPushesNoDecodeTilesMakesPeersTimeOutNamingIt) {
  TPGEMM_REQUIRE_GPUS(2);
  for (const char* two_shot : {"0", "1"}) {  // rank 0 waits on rank 1: its partials, or (two-shot) its sums
    ::setenv("TPGEMM_DECODE_TWO_SHOT", two_shot, 1);
    expect_rank0_times_out_naming_rank1(std::string("gemm_ar fused, decode, two-shot=") + two_shot,
                                        [](const Team& team, cudaStream_t st) {
                                          PlanOptions o;
                                          o.impl = Impl::kFused;
                                          GemmProblem p = small(Op::kGemmAr);
                                          p.m = 64;
                                          auto* plan = new Plan(team, p, o);  // left alive (see above)
                                          auto* data = new testing::RankData(p, team.world_size(), team.rank(), 4, st);
                                          plan->run(data->operands(), st);
                                        });
  }
  ::unsetenv("TPGEMM_DECODE_TWO_SHOT");
}

// The all-reduce kernels' data is their own flag: the peer polls empty lanes until the timeout.
TEST(DistErrors, ARankThatSendsNoAllReduceDataMakesPeersTimeOutNamingIt) {
  TPGEMM_REQUIRE_GPUS(2);
  for (AllReduceImpl impl : {AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot})
    expect_rank0_times_out_naming_rank1(std::string(to_string(impl)), [impl](const Team& team, cudaStream_t st) {
      const int64_t count = 8 * 1000;
      auto* plan = new AllReducePlan(team, count, DType::kBF16, impl);  // left alive (see above)
      auto* in = new DeviceBuffer(count * 2);
      auto* out = new DeviceBuffer(count * 2);
      testing::fill_random(in->get(), DType::kBF16, 1, 1, count, 0, 1, 5 + team.rank(), st);
      plan->run(in->get(), out->get(), st);
    });
}

}  // namespace
}  // namespace tpgemm
