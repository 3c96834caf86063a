// W = 2 and 4 ranks: the all-reduce kernels against the sum, calls back to back, and zeros.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
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

TEST_P(Dist, AllReduceKernelsMatchTheSum) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              for (int64_t count : {int64_t(8), int64_t(8 * 37), int64_t(2048), int64_t(1) << 20, (int64_t(3) << 20) + 8 * 5})
                for (DType dt : {DType::kBF16, DType::kFP16})
                  for (AllReduceImpl impl : {AllReduceImpl::kNccl, AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot, AllReduceImpl::kAuto})
                    for (bool in_place : {false, true}) {
                      const std::string failed = testsupport::check_allreduce(team, count, dt, impl, in_place, 3, 77);
                      RANK_EXPECT(failed.empty(), "%s", failed.c_str());
                    }
            }),
            0);
}

// NOTE [two staging halves]: calls back to back on a stream, nothing synchronised between them, a
// fresh input each time and the same input buffer reused: a rank that ran ahead must not
// overwrite the staging half a slower peer is still reading. Each call moves its own count, up to
// the plan's (NOTE [staging by capacity]).
TEST_P(Dist, AllReduceCallsBackToBackEachSumTheirOwnInput) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              Stream stream = Stream::create();
              const cudaStream_t st = stream.get();
              constexpr int kCalls = 8;
              const DType dt = DType::kBF16;
              // This call's count: the plan's, the smallest, and sizes between (multiples of 8).
              const auto count_of = [](int64_t cap, int call) {
                const int64_t sizes[kCalls] = {cap, 8, cap / 3, cap - 8, cap, 16, cap / 2, cap / 7};
                return std::max<int64_t>(8, sizes[call] / 8 * 8);
              };
              for (int64_t count : {int64_t(8 * 37), int64_t(1) << 20})
                for (AllReduceImpl impl : {AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot}) {
                  const Status s = testsupport::caught([&] {
                    AllReducePlan plan(team, count, dt, impl);
                    DeviceBuffer in(count * 2);
                    std::vector<DeviceBuffer> outs, refs;
                    for (int call = 0; call < kCalls; ++call) {
                      const int64_t n = count_of(count, call);
                      outs.emplace_back(count * 2);
                      refs.emplace_back(n * sizeof(float));
                      testing::poison(outs.back().get(), count, dt, st);
                      testing::reference_sum_of_ranks(refs.back().as<float>(), n, dt, team.world_size(), 1000 * call, st);
                    }
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                    team.barrier();
                    for (int call = 0; call < kCalls; ++call) {
                      const int64_t n = count_of(count, call);
                      testing::fill_random(in.get(), dt, 1, 1, n, 0, 1, 1000 * call + team.rank(), st);
                      plan.run(in.get(), call % 2 == 0 ? outs[call].get() : in.get(), n, st);
                      if (call % 2 == 1)  // in place: keep the result before the next fill
                        TPGEMM_CUDA_CHECK(cudaMemcpyAsync(outs[call].get(), in.get(), n * 2, cudaMemcpyDeviceToDevice, st));
                    }
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                    team.check();
                    for (int call = 0; call < kCalls; ++call) {
                      const int64_t n = count_of(count, call);
                      const auto d = testing::compare(outs[call].get(), dt, refs[call].as<float>(), 1, n, n, n, 0, st);
                      RANK_EXPECT(d.passes(testing::default_eps(dt)), "allreduce %s count %lld call %d (%lld elements): "
                                  "rel_err %.2e, %lld non-finite", std::string(to_string(impl)).c_str(), (long long)count,
                                  call, (long long)n, d.rel_err, (long long)d.nonfinite);
                    }
                  });
                  RANK_EXPECT(s.ok(), "allreduce %s count %lld: %s", std::string(to_string(impl)).c_str(), (long long)count,
                              s.message.c_str());
                }
            }),
            0);
}

// One auto plan for a message that NCCL takes at W = 4 serves calls of any size up to it, each
// on the algorithm its own size calls for (counts that are not a multiple of 8 on NCCL): eagerly,
// then replayed from a CUDA graph before and after prepare(). Bad counts fail on every rank.
TEST_P(Dist, OneAutoAllReducePlanServesCallsOfAnySize) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              Stream stream = Stream::create();
              const cudaStream_t st = stream.get();
              const DType dt = DType::kBF16;
              const int64_t cap = (int64_t(12) << 20) + 5;  // 24 MB, not a multiple of 8
              const std::vector<int64_t> counts = {cap, 8, 1001, 4096, int64_t(1) << 20, (int64_t(3) << 20) + 8, 3, cap - 5};
              const Status s = testsupport::caught([&] {
                // Calls of `n` elements, each on a fresh random input, every output poisoned first
                // and compared with the sum; from a CUDA graph where `graphed`.
                const auto check_calls = [&](AllReducePlan& plan, const std::vector<int64_t>& ns, bool graphed, int seed) {
                  std::vector<DeviceBuffer> outs;
                  for (size_t c = 0; c < ns.size(); ++c) {
                    outs.emplace_back(cap * 2);
                    testing::poison(outs.back().get(), cap, dt, st);
                  }
                  std::vector<DeviceBuffer> ins;  // one input per call (a graph reads them at replay)
                  for (size_t c = 0; c < ns.size(); ++c) {
                    ins.emplace_back(ns[c] * 2);
                    testing::fill_random(ins.back().get(), dt, 1, 1, ns[c], 0, 1, seed + 100 * int(c) + team.rank(), st);
                  }
                  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                  team.barrier();
                  const auto enqueue = [&] {
                    for (size_t c = 0; c < ns.size(); ++c) plan.run(ins[c].get(), outs[c].get(), ns[c], st);
                  };
                  if (graphed) CudaGraph::capture(st, enqueue).launch(st);
                  else enqueue();
                  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                  team.check();
                  for (size_t c = 0; c < ns.size(); ++c) {
                    DeviceBuffer ref(ns[c] * sizeof(float));
                    testing::reference_sum_of_ranks(ref.as<float>(), ns[c], dt, team.world_size(), seed + 100 * int(c), st);
                    const auto d = testing::compare(outs[c].get(), dt, ref.as<float>(), 1, ns[c], ns[c], ns[c], 0, st);
                    RANK_EXPECT(d.passes(testing::default_eps(dt)), "auto all-reduce plan of %lld, call of %lld (%s)%s: "
                                "rel_err %.2e, %lld non-finite", (long long)cap, (long long)ns[c],
                                std::string(to_string(plan.impl(ns[c]))).c_str(), graphed ? ", graphed" : "", d.rel_err,
                                (long long)d.nonfinite);
                    // Nothing past the call's own elements written (the next 4096 still poison).
                    std::vector<uint16_t> after(static_cast<size_t>(std::min<int64_t>(4096, cap - ns[c])));
                    TPGEMM_CUDA_CHECK(cudaMemcpy(after.data(), static_cast<const uint16_t*>(outs[c].get()) + ns[c],
                                                 after.size() * 2, cudaMemcpyDeviceToHost));
                    const auto past = std::count_if(after.begin(), after.end(), [](uint16_t x) { return x != 0xffff; });
                    RANK_EXPECT(past == 0, "call of %lld wrote %lld elements past its own", (long long)ns[c], (long long)past);
                    if (ns[c] % 8 != 0)
                      RANK_EXPECT(plan.impl(ns[c]) == AllReduceImpl::kNccl, "call of %lld elements ran %s, expected nccl",
                                  (long long)ns[c], std::string(to_string(plan.impl(ns[c]))).c_str());
                  }
                };
                {
                  AllReducePlan plan(team, cap, dt, AllReduceImpl::kAuto);
                  RANK_EXPECT(plan.impl() == AllReduceImpl::kNccl, "plan of %lld elements: %s", (long long)cap,
                              std::string(to_string(plan.impl())).c_str());
                  check_calls(plan, counts, /*graphed=*/false, 900);
                }
                AllReducePlan plan(team, cap - 5, dt, AllReduceImpl::kAuto);
                // A call of more than the plan holds: refused on every rank, naming the count.
                DeviceBuffer x(cap * 2), y(cap * 2);
                const Status bad = testsupport::caught([&] { plan.run(x.get(), y.get(), cap, st); });
                RANK_EXPECT(bad.code == ErrorCode::kInvalidArgument && bad.message.find("count=" + std::to_string(cap)) != std::string::npos,
                            "a call of %lld elements (the plan holds %lld): %s", (long long)cap, (long long)(cap - 5),
                            bad.message.c_str());
                // A different count on each rank (the harness checks calls collectively): every rank
                // hears of it before anything runs, and `out` is left as it was.
                testing::poison(y.get(), cap, dt, st);
                TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                const Status apart = testsupport::caught([&] { plan.run(x.get(), y.get(), team.rank() == 0 ? 64 : 128, st); });
                RANK_EXPECT(apart.code == ErrorCode::kInvalidArgument && apart.message.find("different collective calls") != std::string::npos
                                && apart.message.find("count=128") != std::string::npos,
                            "counts 64 and 128 on different ranks: %s", apart.message.c_str());
                std::vector<uint16_t> y_host(4096);
                TPGEMM_CUDA_CHECK(cudaMemcpy(y_host.data(), y.get(), y_host.size() * 2, cudaMemcpyDeviceToHost));
                RANK_EXPECT(std::count(y_host.begin(), y_host.end(), uint16_t(0xffff)) == 4096, "the refused call wrote `out`");
                // Captured before prepare(): calls whose algorithm is not made run the plan's own
                // (the 64-element one-shot is not made by a plan of 24 MB); after it, their own.
                team.barrier();
                std::vector<int64_t> graphed;
                for (int64_t n : counts)
                  if (n <= cap - 5) graphed.push_back(n);
                check_calls(plan, graphed, /*graphed=*/true, 1900);
                for (int64_t n : graphed) plan.prepare(n);
                check_calls(plan, graphed, /*graphed=*/true, 2900);
              });
              RANK_EXPECT(s.ok(), "auto all-reduce plan of %lld: %s", (long long)cap, s.message.c_str());
            }),
            0);
}

// NOTE [measured all-reduce]: an auto plan times every power of two up to its message, routes each
// call by the table (the winner of the smallest timed size at or above it), and a later plan of the
// team times nothing it has; with TPGEMM_TUNE=0 the rules decide.
TEST_P(Dist, AutoAllReduceRoutesCallsByTheTeamsTimings) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              const Status s = testsupport::caught([&] {
                const int64_t count = int64_t(1) << 20;  // 2 MiB of bf16: 4 KiB .. 2 MiB, 10 sizes
                AllReducePlan plan(team, count, DType::kBF16, AllReduceImpl::kAuto);
                const PlanSelection& sel = plan.selection();
                RANK_EXPECT(sel.source == PlanSelection::Source::kTuned && sel.tuning_ms > 0, "selection: %s, %.1f ms",
                            std::string(to_string(sel.source)).c_str(), sel.tuning_ms);
                // "4096 B: nccl 0.0100 oneshot 0.0030 twoshot 0.0050 -> oneshot; 8192 B: ..."
                int sizes = 0;
                for (size_t begin = 0; sel.source == PlanSelection::Source::kTuned && begin < sel.detail.size(); ++sizes) {
                  const size_t end = std::min(sel.detail.find("; ", begin), sel.detail.size());
                  const std::string row = sel.detail.substr(begin, end - begin);
                  begin = end + 2;
                  const int64_t bytes = std::stoll(row);
                  const std::string winner = row.substr(row.find("-> ") + 3);
                  const std::string ran(to_string(plan.impl(bytes / 2)));
                  RANK_EXPECT(ran == winner, "a call of %lld bytes runs %s, its size's winner is %s (%s)", (long long)bytes,
                              ran.c_str(), winner.c_str(), sel.detail.c_str());
                  // Calls between two sizes run the larger one's winner.
                  if (bytes > 4096)
                    RANK_EXPECT(plan.impl(bytes / 4 + 8) == plan.impl(bytes / 2), "%lld bytes + 16 against %lld bytes",
                                (long long)(bytes / 2), (long long)bytes);
                }
                RANK_EXPECT(sizes == 10, "%d sizes timed, expected 10 (4 KiB to 2 MiB): %s", sizes, sel.detail.c_str());
                // A second plan of the team: nothing left to time, the same table.
                AllReducePlan again(team, count / 2, DType::kFP16, AllReduceImpl::kAuto);
                RANK_EXPECT(again.selection().tuning_ms == 0 && sel.detail.find(again.selection().detail) == 0,
                            "second plan: %.1f ms, %s", again.selection().tuning_ms, again.selection().detail.c_str());
                // Rules with tuning off (every rank alike).
                ::setenv("TPGEMM_TUNE", "0", 1);
                const Status off = testsupport::caught([&] {
                  AllReducePlan rules(team, count, DType::kBF16, AllReduceImpl::kAuto);
                  RANK_EXPECT(rules.selection().source == PlanSelection::Source::kFallback, "TPGEMM_TUNE=0: %s",
                              std::string(to_string(rules.selection().source)).c_str());
                });
                ::unsetenv("TPGEMM_TUNE");
                if (!off.ok()) throw Error(off);
              });
              RANK_EXPECT(s.ok(), "measured all-reduce: %s", s.message.c_str());
            }),
            0);
}

// NOTE [dependent launch]: each call launches while the kernel before it ends, so one that read its
// input (or its call counter, or the staging) before waiting for that kernel would read stale
// data. Here each call's input is the output of the call before, with no other kernel between,
// captured in a CUDA graph (whose edges keep the dependent launch) and replayed twice: call k's
// output is W^(k-1) times the first sum (exact for W a power of 2).
TEST_P(Dist, AllReduceChainedInACudaGraphReadsEachCallsOutput) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  if ((W & (W - 1)) != 0) GTEST_SKIP() << "W=" << W << ": the chain's scaling is exact for powers of 2 only";
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              Stream stream = Stream::create();
              const cudaStream_t st = stream.get();
              constexpr int kCalls = 4;
              const DType dt = DType::kBF16;
              for (int64_t count : {int64_t(8 * 37), int64_t(1) << 20})
                for (AllReduceImpl impl : {AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot}) {
                  const Status s = testsupport::caught([&] {
                    AllReducePlan plan(team, count, dt, impl);
                    std::vector<DeviceBuffer> bufs;  // bufs[0] the input, bufs[k] call k's output
                    for (int k = 0; k <= kCalls; ++k) bufs.emplace_back(count * 2);
                    DeviceBuffer ref(count * sizeof(float));
                    testing::reference_sum_of_ranks(ref.as<float>(), count, dt, team.world_size(), 500, st);
                    testing::fill_random(bufs[0].get(), dt, 1, 1, count, 0, 1, 500 + team.rank(), st);
                    const CudaGraph graph = CudaGraph::capture(st, [&] {
                      for (int k = 1; k <= kCalls; ++k) plan.run(bufs[k - 1].get(), bufs[k].get(), st);
                    });
                    for (int replay = 0; replay < 2; ++replay) {
                      for (int k = 1; k <= kCalls; ++k) testing::poison(bufs[k].get(), count, dt, st);
                      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                      team.barrier();
                      graph.launch(st);
                      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                      team.check();
                      DeviceBuffer scaled(count * sizeof(float));
                      float scale = 1.0f;  // W^(k-1)
                      for (int k = 1; k <= kCalls; ++k, scale *= W) {
                        TPGEMM_CUDA_CHECK(cudaMemsetAsync(scaled.get(), 0, scaled.bytes(), st));
                        testing::reference_add(scaled.as<float>(), ref.get(), scale, count, DType::kFP32, st);
                        const auto d = testing::compare(bufs[k].get(), dt, scaled.as<float>(), 1, count, count, count, 0, st);
                        RANK_EXPECT(d.passes(testing::default_eps(dt)), "allreduce %s count %lld, replay %d, call %d of the "
                                    "chain: rel_err %.2e, %lld non-finite", std::string(to_string(impl)).c_str(),
                                    (long long)count, replay, k, d.rel_err, (long long)d.nonfinite);
                      }
                    }
                  });
                  RANK_EXPECT(s.ok(), "allreduce %s count %lld: %s", std::string(to_string(impl)).c_str(), (long long)count,
                              s.message.c_str());
                }
            }),
            0);
}

// NOTE [empty lanes]: +0.0 is the kernels' "empty" pattern, so inputs of +0.0 and -0.0 and sums
// that cancel to zero exactly (rank q sends (-1)^q x; W is even here) must neither hang nor
// come out as anything but +0.0 on every rank. Random data almost never holds an exact zero.
TEST_P(Dist, AllReduceOfZerosAndExactCancellationIsPlusZero) {
  const int W = GetParam();
  TPGEMM_REQUIRE_GPUS(W);
  EXPECT_EQ(testsupport::run_on_ranks(W, [&](const Team& team) {
              Stream stream = Stream::create();
              const cudaStream_t st = stream.get();
              const int64_t count = 8 * 3001;
              std::vector<uint16_t> host(count);
              for (int64_t i = 0; i < count; ++i) {
                const uint16_t x = static_cast<uint16_t>(0x3c00 + i % 977);  // a positive bf16 / fp16 value
                host[i] = i % 3 == 0 ? 0x0000 : i % 3 == 1 ? 0x8000 : static_cast<uint16_t>(team.rank() % 2 ? x | 0x8000 : x);
              }
              for (DType dt : {DType::kBF16, DType::kFP16})
                for (AllReduceImpl impl : {AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot}) {
                  const Status s = testsupport::caught([&] {
                    AllReducePlan plan(team, count, dt, impl);
                    DeviceBuffer in(count * 2), out(count * 2);
                    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(in.get(), host.data(), count * 2, cudaMemcpyHostToDevice, st));
                    for (int rep = 0; rep < 3; ++rep) {
                      testing::poison(out.get(), count, dt, st);
                      plan.run(in.get(), out.get(), st);
                    }
                    std::vector<uint16_t> got(count);
                    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(got.data(), out.get(), count * 2, cudaMemcpyDeviceToHost, st));
                    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
                    team.check();
                    int64_t wrong = 0, first = -1;
                    for (int64_t i = 0; i < count; ++i)
                      if (got[i] != 0 && wrong++ == 0) first = i;
                    RANK_EXPECT(wrong == 0, "allreduce %s %s: %lld lanes not +0.0, first %lld = 0x%04x",
                                std::string(to_string(impl)).c_str(), std::string(to_string(dt)).c_str(), (long long)wrong,
                                (long long)first, first >= 0 ? got[first] : 0);
                  });
                  RANK_EXPECT(s.ok(), "allreduce %s of zeros: %s", std::string(to_string(impl)).c_str(), s.message.c_str());
                }
            }),
            0);
}

}  // namespace
}  // namespace tpgemm
