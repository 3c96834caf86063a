// tpgemm-bench's command line and shape files.
#include <gtest/gtest.h>

#include "bench/cli.h"
#include "bench/shapes.h"
#include "default_shapes.h"
#include "tpgemm/error.h"

namespace tpgemm::bench {
namespace {

BenchConfig parse(std::vector<std::string> args) { return parse_cli(args); }

void expect_rejected(std::vector<std::string> args, const std::string& words) {
  try {
    parse_cli(args);
    FAIL() << "accepted: " << words;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Cli, DefaultsRunEverythingOnTheSharedShapes) {
  const BenchConfig c = parse({});
  EXPECT_EQ(c.ops.size(), 3u);
  EXPECT_TRUE(c.allreduce);
  EXPECT_TRUE(c.impls.empty());
  EXPECT_EQ(c.m, 0);
  EXPECT_EQ(c.iterations, 40);
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_FALSE(c.check);
  EXPECT_FALSE(c.help);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_TRUE(parse({"-h"}).help);
  expect_rejected({"-x"}, "expected a --flag");
}

TEST(Cli, RandomShapesTimingAndThePlannersFlags) {
  const BenchConfig c = parse({"--random=40", "--seed", "123", "--timing=graph", "--rules", "--tune"});
  EXPECT_EQ(c.random, 40);
  EXPECT_EQ(c.seed, 123u);
  EXPECT_EQ(c.timing, BenchConfig::Timing::kGraph);
  EXPECT_TRUE(c.rules);
  EXPECT_TRUE(c.tune_only);
  EXPECT_EQ(parse({"--timing", "batch"}).timing, BenchConfig::Timing::kBatch);
  EXPECT_EQ(parse({}).timing, BenchConfig::Timing::kSync);
  expect_rejected({"--timing=fast"}, "sync, batch or graph");
  expect_rejected({"--seed=5"}, "without --random");
  expect_rejected({"--random=4", "--shapes=x.txt"}, "one source of shapes");
  expect_rejected({"--random=0"}, "--random");
  expect_rejected({"--rules=1"}, "switch");
  EXPECT_EQ(parse({}).matmul, Matmul::kAuto);
  EXPECT_EQ(parse({"--matmul=sm90"}).matmul, Matmul::kSm90);
  EXPECT_EQ(parse({"--matmul", "cublaslt"}).matmul, Matmul::kCublasLt);
  expect_rejected({"--matmul=cutlass"}, "--matmul=cutlass: expected cublaslt, sm90 or auto");
  EXPECT_EQ(parse({}).plan_m, 0);
  EXPECT_EQ(parse({"--plan-m=16384", "--random=4"}).plan_m, 16384);
  expect_rejected({"--plan-m=0"}, "--plan-m");
}

TEST(Cli, CutlassStyleFlagsBothSpellings) {
  const BenchConfig c = parse({"--m=4096", "--n", "8192", "--k=1024", "--l=2", "--alpha=0.5", "--beta", "1", "--iterations=7",
                               "--warmup-iterations=3", "--eps=0.02", "--op=ag_gemm,gemm_ar", "--impl=pipelined",
                               "--dtype=fp16", "--b-layout=kn", "--gpus=2", "--check", "--json=out.json"});
  EXPECT_EQ(c.m, 4096);
  EXPECT_EQ(c.n, 8192);
  EXPECT_EQ(c.k, 1024);
  EXPECT_EQ(c.l, 2);
  EXPECT_FLOAT_EQ(c.alpha, 0.5f);
  EXPECT_FLOAT_EQ(c.beta, 1.0f);
  EXPECT_EQ(c.iterations, 7);
  EXPECT_EQ(c.warmup_iterations, 3);
  EXPECT_DOUBLE_EQ(c.eps, 0.02);
  ASSERT_EQ(c.ops.size(), 2u);
  EXPECT_EQ(c.ops[1], Op::kGemmAr);
  EXPECT_FALSE(c.allreduce);
  ASSERT_EQ(c.impls.size(), 1u);
  EXPECT_EQ(c.impls[0], Impl::kPipelinedCE);
  EXPECT_EQ(c.dtype, DType::kFP16);
  EXPECT_FALSE(c.out_dtype.has_value());
  EXPECT_EQ(parse({"--out-dtype=fp32"}).out_dtype, DType::kFP32);
  const BenchConfig fp8 = parse({"--dtype=e4m3", "--out-dtype=bf16"});
  EXPECT_EQ(fp8.scale_mode, ScaleMode::kTensor);
  EXPECT_EQ(parse({"--dtype=e4m3", "--out-dtype=bf16", "--scale=row"}).scale_mode, ScaleMode::kRow);
  EXPECT_EQ(parse({"--dtype=e4m3", "--out-dtype=bf16", "--scale=block"}).scale_mode, ScaleMode::kBlock);
  EXPECT_EQ(parse({"--dtype=e4m3", "--out-dtype=bf16", "--scale=blockwise"}).scale_mode, ScaleMode::kBlock);
  const BenchConfig strided = parse({"--a-layout=km", "--lda=16", "--ldb=8", "--ldd=24"});
  EXPECT_EQ(strided.ldd, 24);
  EXPECT_EQ(strided.a_layout, ALayout::kKM);
  EXPECT_EQ(strided.lda, 16);
  EXPECT_EQ(strided.ldb, 8);
  EXPECT_EQ(strided.batch_pad, 0);
  EXPECT_EQ(parse({"--l=3", "--batch-pad=64"}).batch_pad, 64);
  EXPECT_EQ(fp8.dtype, DType::kE4M3);
  EXPECT_EQ(fp8.ops.size(), 3u);
  EXPECT_FALSE(fp8.allreduce) << "the default --op=all leaves the all-reduce out for e4m3";
  const BenchConfig grad = parse({"--dtype=e5m2", "--b-dtype=e4m3", "--out-dtype=bf16"});
  EXPECT_EQ(grad.dtype, DType::kE5M2);
  EXPECT_EQ(grad.b_dtype, DType::kE4M3);
  EXPECT_FALSE(parse({"--dtype=e4m3", "--b-dtype=e4m3", "--out-dtype=bf16"}).b_dtype) << "B's type as A's is no b_dtype";
  EXPECT_EQ(c.b_layout, BLayout::kKN);
  EXPECT_EQ(c.gpus, 2);
  EXPECT_TRUE(c.check);
  EXPECT_EQ(c.json, "out.json");
}

TEST(Cli, BaselineMeansNcclForTheAllReduce) {
  const BenchConfig c = parse({"--op=allreduce", "--impl=baseline,twoshot"});
  EXPECT_TRUE(c.allreduce);
  ASSERT_EQ(c.allreduce_impls.size(), 2u);
  EXPECT_EQ(c.allreduce_impls[0], AllReduceImpl::kNccl);
  EXPECT_EQ(c.allreduce_impls[1], AllReduceImpl::kTwoShot);
}

TEST(Cli, LadderNamesItsThreeRungsAndFused) {
  const BenchConfig c = parse({"--op=ag_gemm", "--impl=baseline,ladder"});
  const std::vector<Impl> want = {Impl::kBaseline, Impl::kNaiveRemote, Impl::kThreadloadGather, Impl::kGatherThenGemm,
                                  Impl::kFused};
  EXPECT_EQ(c.impls, want);
  EXPECT_EQ(parse({"--impl=threadload_gather"}).impls, std::vector<Impl>{Impl::kThreadloadGather});
}

TEST(Cli, NamesTheSymmetricCollectiveImplementations) {
  const std::vector<Impl> want = {Impl::kGemmReduceScatter, Impl::kAllGatherGemm, Impl::kGemmOneShot, Impl::kGemmTwoShot};
  EXPECT_EQ(parse({"--impl=gemm_reducescatter,allgather_gemm,gemm_oneshot,gemm_twoshot"}).impls, want);
}

TEST(Cli, GemmCoreOnlyWhenNamed) {
  const BenchConfig c = parse({"--op=gemm", "--gpus=1"});
  EXPECT_TRUE(c.gemm_core);
  EXPECT_TRUE(c.ops.empty());
  EXPECT_FALSE(c.allreduce);
  EXPECT_FALSE(parse({}).gemm_core);
  EXPECT_FALSE(parse({"--op=all"}).gemm_core);
  EXPECT_TRUE(parse({"--op=all,gemm"}).gemm_core);
}

TEST(Cli, RejectsBadInputNamingFlagValueAndExpectation) {
  expect_rejected({"--m=0", "--n=8", "--k=8"}, "--m=0: expected an integer");
  expect_rejected({"--m=64"}, "go together");
  expect_rejected({"--dtype=fp8"}, "--dtype=fp8: expected bf16, fp16, e4m3 or e5m2");
  expect_rejected({"--dtype=fp32"}, "--dtype=fp32: expected bf16, fp16, e4m3 or e5m2");
  expect_rejected({"--dtype=e5m2", "--out-dtype=bf16"}, "--dtype=e5m2 needs --b-dtype=e4m3");
  expect_rejected({"--dtype=e4m3", "--out-dtype=bf16", "--b-dtype=bf16"}, "--b-dtype=bf16: expected e4m3 or e5m2");
  expect_rejected({"--b-dtype=e4m3"}, "--b-dtype with --dtype=bf16: B takes another type than A only as FP8");
  expect_rejected({"--dtype=e4m3"}, "--dtype=e4m3 needs --out-dtype");
  expect_rejected({"--dtype=e4m3", "--out-dtype=bf16", "--op=ag_gemm,allreduce"}, "GEMM ops (ag_gemm");
  expect_rejected({"--dtype=e4m3", "--out-dtype=bf16", "--b-layout=kn"}, "B as nk");
  expect_rejected({"--scale=column"}, "--scale=column: expected tensor, row or block");
  expect_rejected({"--scale=block"}, "--scale=block with --dtype other than e4m3 or e5m2");
  expect_rejected({"--dtype=e4m3", "--out-dtype=bf16", "--scale=block", "--l=2"}, "block scales take one batch entry");
  expect_rejected({"--dtype=e5m2", "--b-dtype=e4m3", "--out-dtype=bf16", "--scale=block"},
                  "--scale=block with --dtype=e5m2 (B e4m3): block scales take e4m3 A and B");
  expect_rejected({"--a-layout=t"}, "--a-layout=t: expected mk or km");
  expect_rejected({"--scale=row"}, "FP8 operands only");
  expect_rejected({"--dtype=e4m3", "--out-dtype=bf16", "--scale=row", "--l=2"}, "expected --l=1");
  expect_rejected({"--dtype=bf16", "--out-dtype=fp16"}, "--out-dtype=fp16 with --dtype=bf16: expected bf16 or fp32");
  expect_rejected({"--out-dtype=fp64"}, "--out-dtype=fp64: expected bf16, fp16 or fp32");
  expect_rejected({"--op=matmul"}, "--op=matmul: expected");
  expect_rejected({"--impl=fastest"}, "--impl=fastest");
  expect_rejected({"--gpus=0"}, "--gpus=0");
  expect_rejected({"--iterations"}, "--iterations: expected a value");
  expect_rejected({"--frobnicate=1"}, "unknown flag --frobnicate");
  expect_rejected({"--eps=-1"}, "--eps=-1");
  expect_rejected({"--alpha=nan"}, "--alpha=nan");
  expect_rejected({"positional"}, "expected a --flag");
  expect_rejected({"--bytes=1000"}, "--bytes=1000: expected a multiple of 16");
  expect_rejected({"--check=false"}, "--check=false: expected no value");
  expect_rejected({"--impl=all,bogus"}, "--impl=all,bogus: expected 'all' alone");
}

TEST(Shapes, TheBuiltInSetIsTheSharedOne) {
  const auto s = parse_shapes(kDefaultShapes, "built-in");
  ASSERT_EQ(s.size(), 15u);
  EXPECT_EQ(s[0].op, Op::kAgGemm);
  EXPECT_EQ(s[0].m, 4096);
  EXPECT_EQ(s.back().op, Op::kGemmAr);
  EXPECT_EQ(s.back().m, 8192);
  const auto a = parse_shapes(kDefaultAllReduceSizes, "built-in");
  ASSERT_EQ(a.size(), 9u);
  EXPECT_TRUE(a[0].allreduce);
  EXPECT_EQ(a.back().bytes, int64_t(1) << 30);
}

TEST(Shapes, ErrorsNameTheLine) {
  try {
    parse_shapes("# comment\nag 64 64 64\nrs 64 x 64\n", "mine.txt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mine.txt:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("N='x'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_shapes("mm 1 2 3\n", "f"), Error);
  EXPECT_THROW(parse_shapes("allreduce\n", "f"), Error);
  EXPECT_THROW(parse_shapes("allreduce 4097\n", "f"), Error);
  EXPECT_THROW(read_shapes_file("/nonexistent/shapes.txt"), Error);
}

}  // namespace
}  // namespace tpgemm::bench
