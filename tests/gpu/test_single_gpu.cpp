// One GPU: the cuBLASLt wrapper against a plain CUDA reference, and every op and
// implementation on a team of one (the degenerate case every schedule must handle).
#include <gtest/gtest.h>
#include <nccl.h>

#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/allreduce/allreduce_tuning.h"
#include "plan/allreduce_timings.h"
#include "plan/problem.h"
#include "support/dist_harness.h"
#include "support/gpu_env.h"
#include "support/plan_check.h"
#include "testing/testing.h"
#include "tpgemm/allreduce.h"

namespace tpgemm {
namespace {

using testsupport::check_calls_of_m;
using testsupport::check_plan;
using testsupport::describe_check;

// A team of one on GPU 0, made once for the whole binary (and never destroyed: static
// destructors run after the CUDA runtime has begun to shut down).
const Team& solo() {
  static const Team* team = [] {
    ncclUniqueId id;
    TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
    return new Team(Team::from_unique_id(id, 0, 1, 0));
  }();
  return *team;
}

TEST(LtMatmul, MatchesAPlainKernelOnOddShapes) {
  TPGEMM_REQUIRE_GPUS(1);
  const Team& team = solo();
  Stream stream = Stream::create();
  struct Shape { int64_t m, n, k, l; };
  for (const Shape s : {Shape{77, 136, 72, 1}, Shape{300, 64, 520, 3}, Shape{1, 8, 8, 1}})
    for (DType dt : {DType::kBF16, DType::kFP16})
      for (BLayout layout : {BLayout::kKN, BLayout::kNK})
        for (bool with_c : {false, true}) {
          gemm::MatmulShape shape = gemm::packed_shape(s.m, s.n, s.k, s.l, dt, layout);
          shape.has_c = with_c;
          const gemm::LtMatmul mm(team.state()->lt, shape);
          const size_t es = dtype_size(dt);
          DeviceBuffer a(s.l * s.m * s.k * es), b(s.l * s.k * s.n * es), c(s.l * s.m * s.n * es), d(s.l * s.m * s.n * es);
          DeviceBuffer ref(s.l * s.m * s.n * sizeof(float)), ws(gemm::LtMatmul::kWorkspaceBytes);
          testing::fill_random(a.get(), dt, s.l, s.m, s.k, 0, s.m, 11, stream.get());
          testing::fill_random(b.get(), dt, s.l, layout == BLayout::kKN ? s.k : s.n, layout == BLayout::kKN ? s.n : s.k, 0,
                               layout == BLayout::kKN ? s.k : s.n, 12, stream.get());
          testing::fill_random(c.get(), dt, s.l, s.m, s.n, 0, s.m, 13, stream.get());
          testing::poison(d.get(), s.l * s.m * s.n, dt, stream.get());
          TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref.get(), 0, ref.bytes(), stream.get()));
          mm.run(a.get(), b.get(), with_c ? c.get() : nullptr, d.get(), 0.75f, 1.5f, ws.get(), stream.get());
          testing::reference_gemm(a.get(), b.get(), with_c ? c.get() : nullptr, ref.as<float>(), s.m, s.n, s.k, s.l, dt,
                                  layout, 0.75f, 1.5f, testing::RefEngine::kNaive, nullptr, stream.get());
          const auto diff = testing::compare(d.get(), dt, ref.as<float>(), 1, s.l * s.m * s.n, 0, 0, 0, stream.get());
          EXPECT_TRUE(diff.passes(testing::default_eps(dt)))
              << s.m << "x" << s.n << "x" << s.k << " L=" << s.l << " " << to_string(dt) << " " << to_string(layout)
              << (with_c ? " +C" : "") << ": rel_err " << diff.rel_err << ", " << diff.nonfinite << " non-finite";
        }
}

TEST(TeamOfOne, EveryOpAndImplementationIsCorrect) {
  TPGEMM_REQUIRE_GPUS(1);
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (DType dt : {DType::kBF16, DType::kFP16})
      for (BLayout layout : {BLayout::kKN, BLayout::kNK})
        for (Impl impl : {Impl::kBaseline, Impl::kPipelinedCE, Impl::kGemmOneShot, Impl::kGemmTwoShot, Impl::kFused,
                          Impl::kNaiveRemote, Impl::kThreadloadGather, Impl::kGatherThenGemm, Impl::kGemmReduceScatter,
                          Impl::kAllGatherGemm, Impl::kAuto}) {
          GemmProblem of_op;
          of_op.op = op;
          if (!plan::impl_supported(of_op, impl, {1, true}).ok()) continue;  // not for this op
          GemmProblem p;
          p.op = op;
          p.m = 200;
          p.n = 136;
          p.k = 72;
          p.l = dt == DType::kFP16 ? 2 : 1;
          p.dtype = dt;
          p.b_layout = layout;
          p.alpha = 0.5f;
          p.beta = layout == BLayout::kKN ? 1.0f : 0.0f;
          p.has_c = layout == BLayout::kKN;
          PlanOptions o;
          o.impl = impl;
          const auto c = check_plan(solo(), p, o, 2, 100);
          EXPECT_TRUE(c.ok) << describe_check(p, o, c);
        }
}

// PlanOptions::return_gathered_a on a team of one: the gathered A is A, byte for byte, in every
// implementation that returns it, one batch entry or three sharing one B.
TEST(TeamOfOne, TheGatheredAIsTheWholeA) {
  TPGEMM_REQUIRE_GPUS(1);
  for (Impl impl : {Impl::kAuto, Impl::kBaseline, Impl::kPipelinedCE, Impl::kFused, Impl::kAllGatherGemm})
    for (int64_t l : {int64_t(1), int64_t(3)}) {
      GemmProblem p;
      p.op = Op::kAgGemm;
      p.m = 200, p.n = 136, p.k = 72, p.l = l;
      p.b_broadcast = l > 1;
      PlanOptions o;
      o.impl = impl;
      o.return_gathered_a = true;
      if (!Plan::can_implement(solo(), p, o).ok()) continue;
      const auto c = check_plan(solo(), p, o, 2, 300 + static_cast<uint64_t>(l));
      EXPECT_TRUE(c.ok) << describe_check(p, o, c);
    }
}

// NOTE [pipelined calls of fewer rows] on a team of one: one pipelined_ce plan serves calls of
// several M in turn (each range's instance, then the plan's own M again), in one and in three
// pieces per block, batched with C and with A's rows at a stride of its own; each checked against
// its own M's reference with nothing of D beyond it written, and from a CUDA graph; and `auto`,
// whose ranges are tuned on calls of their middle M. On the Hopper core's matmuls (configured per
// shape) a call of fewer rows is refused, naming the option.
TEST(TeamOfOne, PipelinedServesCallsOfAnyM) {
  TPGEMM_REQUIRE_GPUS(1);
  uint64_t seed = 700;
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int chunks : {1, 3})
      for (int variant : {0, 1}) {
        GemmProblem p;
        p.op = op;
        p.m = 520;
        p.n = 136;
        p.k = 72;
        if (variant == 1) p.l = 2, p.alpha = 0.5f, p.beta = -1.25f, p.has_c = true, p.lda = 80;
        PlanOptions o;
        o.impl = Impl::kPipelinedCE;
        o.chunks_per_rank = chunks;
        o.matmul = Matmul::kCublasLt;
        const std::vector<int64_t> ms = {520, 1, 3, 7, 260, 517, 64, 520, 129};
        const auto c = check_calls_of_m(solo(), p, o, ms, seed += 100);
        EXPECT_TRUE(c.ok) << describe_check(p, o, c);
        EXPECT_EQ(c.ran, Impl::kPipelinedCE);
        const auto g = check_calls_of_m(solo(), p, o, {300, 520, 257}, seed += 100, /*graph=*/true);
        EXPECT_TRUE(g.ok) << "graph: " << describe_check(p, o, g);
        if (chunks == 1 && variant == 0) {  // auto: each range tuned on calls of its middle M
          const auto a = check_calls_of_m(solo(), p, PlanOptions{}, {520, 300, 7, 129, 520}, seed += 100);
          EXPECT_TRUE(a.ok) << "auto: " << describe_check(p, PlanOptions{}, a);
        }
      }
  GemmProblem p;
  p.op = Op::kGemmRs;
  p.m = 512, p.n = 128, p.k = 64;
  PlanOptions o;
  o.impl = Impl::kPipelinedCE;
  o.matmul = Matmul::kSm90;
  if (!Plan::can_implement(solo(), p, o).ok()) return;  // (no Hopper core on this GPU)
  const auto c = check_calls_of_m(solo(), p, o, {256}, 99);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.status.code, ErrorCode::kUnsupported) << c.status.message;
  EXPECT_NE(c.status.message.find("matmul=sm90"), std::string::npos) << c.status.message;
}

// Types beyond the input type, on one GPU: an fp32 D of bf16 / fp16 operands, and e4m3 operands
// with their scales (tensor-wise, row-wise and block) into a bf16, fp16 or fp32 D, with and without
// C, batched where the scales allow.
TEST(TeamOfOne, Fp32OutputsAndFp8OperandsMatchTheReference) {
  TPGEMM_REQUIRE_GPUS(1);
  struct Types { DType in, out; ScaleMode scales; };
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (const Types t : {Types{DType::kBF16, DType::kFP32, ScaleMode::kTensor},
                          Types{DType::kFP16, DType::kFP32, ScaleMode::kTensor},
                          Types{DType::kE4M3, DType::kBF16, ScaleMode::kTensor},
                          Types{DType::kE4M3, DType::kFP16, ScaleMode::kTensor},
                          Types{DType::kE4M3, DType::kFP32, ScaleMode::kTensor},
                          Types{DType::kE4M3, DType::kBF16, ScaleMode::kRow},
                          Types{DType::kE4M3, DType::kFP32, ScaleMode::kRow},
                          Types{DType::kE4M3, DType::kBF16, ScaleMode::kBlock},
                          Types{DType::kE4M3, DType::kFP32, ScaleMode::kBlock}})
      for (bool with_c : {false, true})
        for (Impl impl : {Impl::kBaseline, Impl::kAuto}) {
          GemmProblem p;
          p.op = op;
          p.m = 200;
          p.n = 144;  // (FP8 rows of D: a multiple of 16)
          p.k = t.scales == ScaleMode::kBlock ? 384 : 80;  // (block: whole 128-column blocks of K)
          p.l = with_c && t.scales == ScaleMode::kTensor ? 2 : 1;  // (row-wise and block scales: one batch entry)
          p.dtype = t.in;
          p.out_dtype = t.out;
          p.scale_mode = t.scales;
          p.alpha = 0.5f;
          p.beta = with_c ? -1.0f : 0.0f;
          p.has_c = with_c;
          PlanOptions o;
          o.impl = impl;
          const auto c = check_plan(solo(), p, o, 2, 400);
          EXPECT_TRUE(c.ok && plan::impl_supported(p, c.ran, {1, true}).ok()) << describe_check(p, o, c);
        }
}

// fused alone is the GEMM core with the rule's configuration: on this shape stream-K, which
// needs a workspace (tests/unit/test_sm90_config.cpp pins that choice).
TEST(TeamOfOne, FusedOnAShapeTheCoreRunsAsStreamK) {
  TPGEMM_REQUIRE_GPUS(1);
  GemmProblem p;
  p.op = Op::kAgGemm;
  p.m = 2048, p.n = 3584, p.k = 8192;
  PlanOptions o;
  o.impl = Impl::kFused;
  const auto c = check_plan(solo(), p, o, 2, 300);
  EXPECT_TRUE(c.ok) << describe_check(p, o, c);
}

TEST(TeamOfOne, BadOperandsThrowAndLeaveDUntouched) {
  TPGEMM_REQUIRE_GPUS(1);
  GemmProblem p;
  p.op = Op::kGemmAr;
  p.m = 64, p.n = 64, p.k = 64;
  Plan plan(solo(), p);
  Stream stream = Stream::create();
  DeviceBuffer a(64 * 64 * 2), b(64 * 64 * 2), d(64 * 64 * 2);
  testing::poison(d.get(), 64 * 64, p.dtype, stream.get());
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  const Status null_b = testsupport::caught([&] { plan.run({a.get(), nullptr, nullptr, d.get()}, stream.get()); });
  EXPECT_EQ(null_b.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(null_b.message.find("B is null"), std::string::npos) << null_b.message;
  const Status misaligned =
      testsupport::caught([&] { plan.run({a.as<char>() + 8, b.get(), nullptr, d.get()}, stream.get()); });
  EXPECT_EQ(misaligned.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(misaligned.message.find("16-byte"), std::string::npos) << misaligned.message;
  std::vector<uint16_t> host(64 * 64);
  TPGEMM_CUDA_CHECK(cudaMemcpy(host.data(), d.get(), host.size() * 2, cudaMemcpyDeviceToHost));
  for (uint16_t v : host) ASSERT_EQ(v, 0xFFFF) << "a rejected call wrote D";
}

// The caller's own graph capture (global mode, as torch captures): a plan's call and an
// all-reduce's captured, then replayed, give what the eager calls gave. Nothing in a call may use
// an API that capture forbids (the capture would be invalidated).
TEST(TeamOfOne, CallsCapturedInTheCallersGraphReplayAsTheyRan) {
  TPGEMM_REQUIRE_GPUS(1);
  GemmProblem p;
  p.op = Op::kGemmAr;
  p.m = 128, p.n = 256, p.k = 64;
  Plan plan(solo(), p);
  AllReducePlan ar(solo(), 4096, DType::kBF16);
  Stream stream = Stream::create();
  const cudaStream_t st = stream.get();
  const int64_t nd = p.m * p.n;
  DeviceBuffer a(p.m * p.k * 2), b(p.n * p.k * 2), eager(nd * 2), replayed(nd * 2), x(4096 * 2), y(4096 * 2);
  testing::fill_random(a.get(), DType::kBF16, 1, 1, p.m * p.k, 0, 1, 7, st);
  testing::fill_random(b.get(), DType::kBF16, 1, 1, p.n * p.k, 0, 1, 8, st);
  testing::fill_random(x.get(), DType::kBF16, 1, 1, 4096, 0, 1, 9, st);
  plan.run({a.get(), b.get(), nullptr, eager.get()}, st);
  testing::poison(replayed.get(), nd, DType::kBF16, st);
  testing::poison(y.get(), 4096, DType::kBF16, st);
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
  CudaGraph graph;
  const Status captured = testsupport::caught([&] {
    graph = CudaGraph::capture(st, [&] {
      plan.run({a.get(), b.get(), nullptr, replayed.get()}, st);
      ar.run(x.get(), y.get(), 4096, st);
    }, cudaStreamCaptureModeGlobal);
  });
  ASSERT_TRUE(captured.ok()) << captured.message;  // (an invalidated capture fails here too)
  graph.launch(st);
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<uint16_t> want(nd), got(nd), in(4096), out(4096);
  TPGEMM_CUDA_CHECK(cudaMemcpy(want.data(), eager.get(), nd * 2, cudaMemcpyDeviceToHost));
  TPGEMM_CUDA_CHECK(cudaMemcpy(got.data(), replayed.get(), nd * 2, cudaMemcpyDeviceToHost));
  TPGEMM_CUDA_CHECK(cudaMemcpy(in.data(), x.get(), 4096 * 2, cudaMemcpyDeviceToHost));
  TPGEMM_CUDA_CHECK(cudaMemcpy(out.data(), y.get(), 4096 * 2, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, want) << "the replayed gemm_ar differs from the eager call";
  EXPECT_EQ(out, in) << "the replayed all-reduce of one rank is not its input";
}

// The all-reduce on a team of one: every call a copy of its input, whatever its count (any count
// up to the plan's with auto; a multiple of 8 with the symmetric kernels asked for by name).
TEST(TeamOfOne, AllReduceOfAnyCountIsItsInput) {
  TPGEMM_REQUIRE_GPUS(1);
  Stream stream = Stream::create();
  const cudaStream_t st = stream.get();
  const int64_t cap = 1001;
  AllReducePlan plan(solo(), cap, DType::kBF16, AllReduceImpl::kAuto);
  DeviceBuffer in(cap * 2), out(cap * 2);
  std::vector<uint16_t> want(cap), got(cap);
  for (int64_t n : {cap, int64_t(8), int64_t(3), int64_t(1000)}) {
    testing::fill_random(in.get(), DType::kBF16, 1, 1, n, 0, 1, 40 + n, st);
    testing::poison(out.get(), cap, DType::kBF16, st);
    plan.prepare(n);
    plan.run(in.get(), out.get(), n, st);
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(want.data(), in.get(), cap * 2, cudaMemcpyDeviceToHost, st));
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(got.data(), out.get(), cap * 2, cudaMemcpyDeviceToHost, st));
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
    for (int64_t i = 0; i < cap; ++i)
      ASSERT_EQ(got[i], i < n ? want[i] : uint16_t(0xFFFF)) << "call of " << n << " elements, element " << i;
  }
  const Status over = testsupport::caught([&] { plan.run(in.get(), out.get(), cap + 1, st); });
  EXPECT_EQ(over.code, ErrorCode::kInvalidArgument);
  EXPECT_NE(over.message.find("count=1002"), std::string::npos) << over.message;
  const Status odd = testsupport::caught([&] { AllReducePlan named(solo(), cap, DType::kBF16, AllReduceImpl::kOneShot); });
  EXPECT_EQ(odd.code, ErrorCode::kUnsupported);
  EXPECT_NE(odd.message.find("multiple of 8"), std::string::npos) << odd.message;
}

// The measured all-reduce's timing (NOTE [measured all-reduce]) run on a GPU, on a team of one of
// its own (a plan of one rank does not time: nothing to exchange): every power of two from 4 KiB
// to the message gets a row with NCCL's time and the symmetric kernels' where not pruned, and a
// second plan of the same message finds nothing left to time.
TEST(TeamOfOne, AllReduceTimingFillsTheTeamsTable) {
  TPGEMM_REQUIRE_GPUS(1);
  ncclUniqueId id;
  TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
  const Team team = Team::from_unique_id(id, 0, 1, 0);
  const int64_t message = int64_t(3) << 19;  // 1.5 MiB: timed up to 2 MiB
  const double ms = detail::measure_allreduce(team.state(), DType::kBF16, message);
  EXPECT_GT(ms, 0.0);
  const plan::AllReduceTimings& table = team.state()->allreduce_timings;
  ASSERT_EQ(table.rows.size(), 10u) << plan::describe(table, int64_t(2) << 20);  // 4 KiB .. 2 MiB
  int64_t bytes = plan::kSmallestTimedBytes;
  for (const auto& [size, row] : table.rows) {
    EXPECT_EQ(size, bytes);
    EXPECT_GT(row.ms[0], 0.0f) << "NCCL at " << size << " bytes: " << plan::describe(table, size);
    for (int i = 1; i < plan::kNumAllReduceCandidates; ++i)
      if (plan::worth_timing(table, plan::kAllReduceCandidates[i], size) || size == plan::kSmallestTimedBytes) {
        EXPECT_GT(row.ms[i], 0.0f) << to_string(plan::kAllReduceCandidates[i]) << " at " << size << " bytes: "
                                   << plan::describe(table, size);
      }
    bytes *= 2;
  }
  EXPECT_EQ(detail::measure_allreduce(team.state(), DType::kFP16, message), 0.0) << "timed again";
}

TEST(TeamOfOne, UnsupportedShapesAreRejectedWithTheReason) {
  TPGEMM_REQUIRE_GPUS(1);
  GemmProblem p;
  p.m = 64, p.n = 100, p.k = 64;
  const Status s = testsupport::caught([&] { Plan plan(solo(), p); });
  EXPECT_EQ(s.code, ErrorCode::kUnsupported);
  EXPECT_NE(s.message.find("N=100"), std::string::npos) << s.message;
}

}  // namespace
}  // namespace tpgemm
