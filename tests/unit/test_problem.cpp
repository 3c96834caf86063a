// Shape and plan math, argument validation and what each implementation takes (pure host logic).
#include <gtest/gtest.h>

#include "plan/choose.h"
#include "plan/problem.h"
#include "plan/schedule.h"
#include "support/host_problems.h"

namespace tpgemm::plan {
namespace {

using testhost::ag;
using testhost::expect_error;

TEST(RowBlocks, CoverEveryRowOnceAndStayEven) {
  for (int64_t m : {1, 7, 16, 1000, 4099})
    for (int w = 1; w <= 8; ++w) {
      int64_t next = 0;
      for (int r = 0; r < w; ++r) {
        const RowBlock b = rank_block(m, w, r);
        EXPECT_EQ(b.begin, next);
        EXPECT_LE(b.rows, max_block_rows(m, w));
        EXPECT_GE(b.rows, m / w);
        next = b.begin + b.rows;
      }
      EXPECT_EQ(next, m);
      for (int parts : {1, 2, 3, 5}) {
        int64_t sum = 0;
        for (int j = 0; j < parts; ++j) sum += split_rows(m, parts, j).rows;
        EXPECT_EQ(sum, m);
      }
    }
}

TEST(OperandSizes, FollowTheOpConventions) {
  GemmProblem p = ag(4096, 8192, 1024);
  p.l = 2;
  OperandSizes s = operand_sizes(p, 4);
  EXPECT_EQ(s.a, 2 * 1024 * 1024);  // the shard
  EXPECT_EQ(s.b, 2 * 1024 * 8192);
  EXPECT_EQ(s.d, 2 * 4096 * 8192);
  EXPECT_EQ(s.c, 0);
  p.op = Op::kGemmRs;
  p.has_c = true;
  s = operand_sizes(p, 4);
  EXPECT_EQ(s.a, 2 * 4096 * 1024);
  EXPECT_EQ(s.d, 2 * 1024 * 8192);  // the scattered rows
  EXPECT_EQ(s.c, s.d);
  p.op = Op::kGemmAr;
  EXPECT_EQ(operand_sizes(p, 4).d, 2 * 4096 * 8192);
}

// NOTE [shard along N]: ag_gemm gathers B's columns, gemm_rs scatters D's columns.
TEST(ShardAlongN, SizesTransposeValidationAndChoice) {
  GemmProblem p = ag(1001, 8192, 4096);  // M need not divide by W: rows are not split
  p.shard_dim = ShardDim::kN;
  p.b_layout = BLayout::kKN;
  p.l = 2;
  OperandSizes s = operand_sizes(p, 4);
  EXPECT_EQ(s.a, 2 * 1001 * 4096);  // this rank's rows, kept
  EXPECT_EQ(s.b, 2 * 4096 * 2048);  // this rank's columns of B
  EXPECT_EQ(s.d, 2 * 1001 * 8192);
  EXPECT_TRUE(validate_problem(p, 4).ok());
  const GemmProblem t = transposed(p);
  EXPECT_EQ(t.m, 8192);
  EXPECT_EQ(t.n, 1001);
  EXPECT_EQ(t.shard_dim, ShardDim::kM);
  EXPECT_EQ(t.b_layout, BLayout::kNK);
  EXPECT_EQ(operand_sizes(t, 4).a, s.b);  // the transposed problem gathers B's blocks as its A
  p.op = Op::kGemmRs;
  s = operand_sizes(p, 4);
  EXPECT_EQ(s.b, 2 * 4096 * 8192);
  EXPECT_EQ(s.d, 2 * 1001 * 2048);  // this rank's columns of the sum

  p.n = 8200;  // 2050 columns per rank: not 16-byte rows
  expect_error(validate_problem(p, 4), ErrorCode::kUnsupported, {"N=8200", "shard_dim=n", "8 x W = 32"});
  p.n = 8192;
  p.op = Op::kGemmAr;
  expect_error(validate_problem(p, 4), ErrorCode::kInvalidArgument, {"shard_dim=n", "gemm_ar", "shard_dim=m"});
  p.op = Op::kAgGemm;
  expect_error(impl_supported(p, Impl::kFused, {4, true}), ErrorCode::kUnsupported, {"fused", "along M only", "pipelined_ce"});
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, {4, true}).ok());

  // The transposed problem's rules: 2048 columns per rank take the pipeline, in one chunk. At
  // M = 1024 the transposed ag_gemm would take fused (16384 x 3584-like waves); along N it is
  // pipelined_ce instead.
  p.m = 1024;
  p.n = 16384;
  GemmProblem along_m = transposed(p);
  along_m.op = Op::kAgGemm;
  EXPECT_EQ(choose(along_m, {4, true}, {}).impl, Impl::kFused);
  EXPECT_EQ(choose(p, {4, true}, {}).impl, Impl::kPipelinedCE);
  p.n = 8192;
  p.m = 1001;
  for (Op op : {Op::kAgGemm, Op::kGemmRs}) {
    p.op = op;
    const Choice c = choose(p, {4, true}, {});
    EXPECT_EQ(c.impl, Impl::kPipelinedCE) << to_string(op);
    EXPECT_EQ(c.chunks, 1);
    PlanOptions o;
    o.impl = Impl::kPipelinedCE;
    o.chunks_per_rank = 3;
    EXPECT_EQ(choose(p, {4, true}, o).chunks, 1);
  }
  p.n = 4 * 128;  // 128 columns per rank: too few for the pipeline
  for (Op op : {Op::kAgGemm, Op::kGemmRs}) {
    p.op = op;
    EXPECT_EQ(choose(p, {4, true}, {}).impl, Impl::kBaseline) << to_string(op);
  }
  p.n = 2 * 128;  // the symmetric collectives behind one matmul are measured along M only
  for (Op op : {Op::kAgGemm, Op::kGemmRs}) {
    p.op = op;
    EXPECT_EQ(choose(p, {2, true}, {}).impl, Impl::kBaseline) << to_string(op);
  }
}

TEST(ValidateProblem, AcceptsTheSharedShapes) {
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    GemmProblem p = ag(16384, 8192, 2048);
    p.op = op;
    EXPECT_TRUE(validate_problem(p, 4).ok());
    EXPECT_TRUE(validate_problem(p, 8).ok());
  }
}

// A decode step: fewer rows than ranks. gemm_ar takes any M >= 1; implementations that give each
// rank a block of rows refuse it, and auto routes around them.
TEST(ValidateProblem, GemmArTakesFewerRowsThanRanks) {
  for (int64_t m : {1, 2, 3, 7}) {
    GemmProblem p = ag(m, 8192, 2048);
    p.op = Op::kGemmAr;
    EXPECT_TRUE(validate_problem(p, 8).ok()) << m;
    expect_error(impl_supported(p, Impl::kPipelinedCE, {8, true}), ErrorCode::kUnsupported,
                 {"pipelined_ce", "at least one row per rank", "M=" + std::to_string(m)});
    for (Impl impl : {Impl::kBaseline, Impl::kGemmOneShot, Impl::kGemmTwoShot})
      EXPECT_TRUE(impl_supported(p, impl, {8, true}).ok()) << to_string(impl);
    for (int w : {2, 4, 8}) {
      const Impl chosen = choose(p, {w, true}, {}).impl;
      EXPECT_TRUE(impl_supported(p, chosen, {w, true}).ok()) << m << " at W=" << w << ": " << to_string(chosen);
    }
  }
}

TEST(ValidateOperands, TheGatheredAOut) {
  GemmProblem p = ag(1024, 256, 128);
  alignas(16) static char mem[4][1 << 21];
  Operands o{mem[0], mem[1], nullptr, mem[2]};
  EXPECT_TRUE(validate_operands(p, 2, o).ok()) << "not asked for: not checked";
  expect_error(validate_operands(p, 2, o, true), ErrorCode::kInvalidArgument, {"A_gathered is null", "[L, M, K]"});
  o.a_gathered = mem[3] + 2;
  expect_error(validate_operands(p, 2, o, true), ErrorCode::kInvalidArgument, {"A_gathered", "16-byte"});
  o.a_gathered = mem[2];
  expect_error(validate_operands(p, 2, o, true), ErrorCode::kInvalidArgument, {"A_gathered", "overlaps D"});
  o.a_gathered = mem[3];
  EXPECT_TRUE(validate_operands(p, 2, o, true).ok());
  for (Impl impl : {Impl::kAuto, Impl::kBaseline, Impl::kPipelinedCE, Impl::kFused, Impl::kAllGatherGemm})
    EXPECT_TRUE(gathered_a_supported(p, impl).ok()) << to_string(impl);
  expect_error(gathered_a_supported(p, Impl::kNaiveRemote), ErrorCode::kUnsupported, {"naive_remote", "gathered A"});
  p.op = Op::kGemmRs;
  expect_error(gathered_a_supported(p, Impl::kAuto), ErrorCode::kInvalidArgument, {"gemm_rs", "only ag_gemm along M"});
}

TEST(ValidateProblem, NamesArgumentValueAndExpectation) {
  expect_error(validate_problem(ag(1001, 64, 64), 4), ErrorCode::kInvalidArgument, {"M=1001", "W=4", "divisible"});
  GemmProblem rs = ag(1002, 64, 64);
  rs.op = Op::kGemmRs;
  expect_error(validate_problem(rs, 4), ErrorCode::kInvalidArgument, {"M=1002", "gemm_rs"});
  GemmProblem ar = rs;
  ar.op = Op::kGemmAr;
  EXPECT_TRUE(validate_problem(ar, 4).ok()) << "gemm_ar takes uneven row blocks";
  expect_error(validate_problem(ag(64, 100, 64), 2), ErrorCode::kUnsupported, {"N=100", "multiple of 8"});
  expect_error(validate_problem(ag(64, 64, 20), 2), ErrorCode::kUnsupported, {"K=20", "multiple of 8"});
  expect_error(validate_problem(ag(0, 64, 64), 2), ErrorCode::kInvalidArgument, {"M=0"});
  GemmProblem b = ag(64, 64, 64);
  b.beta = 0.5f;
  expect_error(validate_problem(b, 2), ErrorCode::kInvalidArgument, {"beta=0.5", "C"});
  GemmProblem d = ag(64, 64, 64);
  d.dtype = static_cast<DType>(7);
  expect_error(validate_problem(d, 2), ErrorCode::kUnsupported, {"dtype 7"});
  GemmProblem l = ag(64, 64, 64);
  l.b_layout = static_cast<BLayout>(3);
  expect_error(validate_problem(l, 2), ErrorCode::kUnsupported, {"B layout 3"});
  expect_error(validate_problem(ag(64, 64, 64), 0), ErrorCode::kInvalidArgument, {"world size 0"});
  GemmProblem big = ag(int64_t(1) << 30, int64_t(1) << 30, 64);
  expect_error(validate_problem(big, 1), ErrorCode::kInvalidArgument, {"2^50"});
  GemmProblem batches = ag(64, 64, 64);
  batches.l = 70000;
  expect_error(validate_problem(batches, 1), ErrorCode::kInvalidArgument, {"L=70000"});
}

// D in fp32 for bf16 / fp16 inputs (GemmProblem::out_dtype): the baseline writes it, the rest refuse.
TEST(OutDtype, Fp32DIsTakenWhereMatmulsAloneWriteDAndSizedInFourBytes) {
  EXPECT_EQ(parse_dtype("fp32"), DType::kFP32);
  EXPECT_EQ(parse_dtype("float32"), DType::kFP32);
  EXPECT_EQ(dtype_size(DType::kFP32), 4u);
  GemmProblem p = ag(64, 64, 64);
  EXPECT_EQ(d_dtype(p), DType::kBF16) << "unset: the input type";
  EXPECT_EQ(describe(p).find("out="), std::string::npos);
  p.out_dtype = DType::kFP32;
  EXPECT_EQ(d_dtype(p), DType::kFP32);
  EXPECT_NE(describe(p).find("out=fp32"), std::string::npos) << describe(p);
  EXPECT_TRUE(validate_problem(p, 2).ok());
  GemmProblem same = p;
  same.out_dtype = DType::kBF16;
  EXPECT_TRUE(validate_problem(same, 2).ok()) << "the input type, named";
  GemmProblem other = p;
  other.out_dtype = DType::kFP16;
  expect_error(validate_problem(other, 2), ErrorCode::kUnsupported, {"out_dtype fp16", "dtype bf16", "or fp32"});
  GemmProblem fp32_in = ag(64, 64, 64);
  fp32_in.dtype = DType::kFP32;
  expect_error(validate_problem(fp32_in, 2), ErrorCode::kUnsupported, {"dtype fp32", "bf16, fp16, e4m3 or e5m2", "out_dtype=fp32"});
  // D and C are sized in D's type: ag_gemm's D of 64 x 64 is 8 KiB in bf16, 16 KiB in fp32.
  alignas(256) static char mem[1 << 20];
  Operands ok{mem, mem + 65536, nullptr, mem + 131072};
  EXPECT_TRUE(validate_operands(p, 2, ok).ok());
  Operands before_b = ok;
  before_b.d = mem + 65536 - 12 * 1024;
  EXPECT_TRUE(validate_operands(ag(64, 64, 64), 2, before_b).ok()) << "a bf16 D ends 4 KiB before B";
  expect_error(validate_operands(p, 2, before_b), ErrorCode::kInvalidArgument, {"overlaps B"});
  const Topology topo{4, true};
  for (Impl impl : {Impl::kFused, Impl::kAllGatherGemm})
    expect_error(impl_supported(p, impl, topo), ErrorCode::kUnsupported, {"out_dtype=fp32", "baseline"});
  // pipelined_ce's ag_gemm along M writes D by matmuls alone; along N it moves D's columns.
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, topo).ok());
  EXPECT_TRUE(impl_supported(p, Impl::kBaseline, topo).ok());
  GemmProblem along_n = p;  // the type is the reason given, whatever else the shape rules out
  along_n.shard_dim = ShardDim::kN;
  expect_error(impl_supported(along_n, Impl::kFused, topo), ErrorCode::kUnsupported, {"out_dtype=fp32"});
  expect_error(impl_supported(along_n, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported, {"out_dtype=fp32"});
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (int64_t m : {64, 4096, 65536}) {
      GemmProblem q = ag(m, 8192, 8192);
      q.op = op;
      q.out_dtype = DType::kFP32;
      const Impl chosen = choose(q, topo, {}).impl;
      EXPECT_TRUE(impl_supported(q, chosen, topo).ok()) << describe(q) << " chose " << to_string(chosen);
      if (op != Op::kAgGemm) {
        EXPECT_EQ(chosen, Impl::kBaseline) << describe(q);
      }
    }
}

// FP8 (e4m3) A and B with one scale each: an output type of bf16, fp16 or fp32 named, B as [N, K],
// K and N (each rank's N where N is split) multiples of 16, both scales given at 16-byte aligned
// addresses (and none for other types); the baseline, and for gemm_rs and gemm_ar into a 16-bit D
// the implementations whose matmuls are cuBLASLt's.
TEST(Fp8, ValidationNamesWhatIsMissingAndWhichImplementationsTakeIt) {
  EXPECT_EQ(parse_dtype("e4m3"), DType::kE4M3);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::kE4M3);
  EXPECT_EQ(dtype_size(DType::kE4M3), 1u);
  GemmProblem p = ag(64, 64, 64);
  p.dtype = DType::kE4M3;
  expect_error(validate_problem(p, 2), ErrorCode::kUnsupported, {"dtype e4m3", "out_dtype unset", "bf16, fp16 or fp32"});
  for (DType out : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    p.out_dtype = out;
    EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  }
  p.out_dtype = DType::kE4M3;
  expect_error(validate_problem(p, 2), ErrorCode::kUnsupported, {"out_dtype e4m3", "never FP8"});
  p.out_dtype = DType::kBF16;
  GemmProblem kn = p;
  kn.b_layout = BLayout::kKN;
  expect_error(validate_problem(kn, 2), ErrorCode::kUnsupported, {"e4m3", "b_layout=kn", "expected b_layout=nk"});
  GemmProblem k24 = ag(64, 64, 24);
  k24.dtype = DType::kE4M3;
  k24.out_dtype = DType::kBF16;
  expect_error(validate_problem(k24, 2), ErrorCode::kUnsupported, {"K=24", "multiple of 16"});
  GemmProblem n136 = p;
  n136.n = 136;
  expect_error(validate_problem(n136, 2), ErrorCode::kUnsupported, {"N=136", "e4m3", "multiple of 16"});
  n136.shard_dim = ShardDim::kN;
  n136.n = 4 * 24;  // 24 columns per rank: 8-aligned, not 16
  expect_error(validate_problem(n136, 4), ErrorCode::kUnsupported, {"N=96", "shard_dim=n", "multiple of 64"});
  n136.n = 4 * 32;
  EXPECT_TRUE(validate_problem(n136, 4).ok()) << describe(n136);
  // Scales: both, 16-byte aligned, not inside D; none for 16-bit operands.
  alignas(256) static char mem[1 << 20];
  alignas(16) static float scales[8] = {1.0f, 0, 0, 0, 1.0f};
  Operands o{mem, mem + 65536, nullptr, mem + 131072};
  expect_error(validate_operands(p, 2, o), ErrorCode::kInvalidArgument, {"a_scale is null", "e4m3"});
  o.a_scale = scales;
  expect_error(validate_operands(p, 2, o), ErrorCode::kInvalidArgument, {"b_scale is null"});
  o.b_scale = scales + 4;
  EXPECT_TRUE(validate_operands(p, 2, o).ok());
  Operands odd = o;
  odd.b_scale = scales + 1;
  expect_error(validate_operands(p, 2, odd), ErrorCode::kInvalidArgument, {"b_scale=", "16-byte aligned"});
  Operands inside = o;
  inside.a_scale = reinterpret_cast<const float*>(mem + 131072 + 64);
  expect_error(validate_operands(p, 2, inside), ErrorCode::kInvalidArgument, {"overlaps a_scale"});
  expect_error(validate_operands(ag(64, 64, 64), 2, o), ErrorCode::kInvalidArgument, {"a_scale or b_scale", "bf16"});
  EXPECT_TRUE(gathered_a_supported(p, Impl::kBaseline).ok()) << "the rows as sent (types.h: Operands::a_gathered)";
  const Topology topo{4, true};
  for (Impl impl : {Impl::kFused, Impl::kAllGatherGemm})
    expect_error(impl_supported(p, impl, topo), ErrorCode::kUnsupported, {"dtype=e4m3", "baseline"});
  EXPECT_TRUE(impl_supported(p, Impl::kBaseline, topo).ok());
  // ag_gemm along M: pipelined_ce gathers every rank's scale with its rows (NOTE [gathered
  // scales]), into any output type; along N it does not.
  for (DType out : {DType::kBF16, DType::kFP16, DType::kFP32}) {
    GemmProblem q = p;
    q.out_dtype = out;
    EXPECT_TRUE(impl_supported(q, Impl::kPipelinedCE, topo).ok()) << describe(q);
    q.shard_dim = ShardDim::kN;
    expect_error(impl_supported(q, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported, {"dtype=e4m3", "shard_dim=n"});
  }
  // gemm_rs and gemm_ar along M into a 16-bit D: the implementations that run cuBLASLt and move D.
  for (Op op : {Op::kGemmRs, Op::kGemmAr}) {
    GemmProblem q = p;
    q.op = op;
    q.m = 4096;
    const Impl own = op == Op::kGemmRs ? Impl::kGemmReduceScatter : Impl::kGemmTwoShot;
    for (Impl impl : {Impl::kPipelinedCE, own}) {
      EXPECT_TRUE(impl_supported(q, impl, topo).ok()) << describe(q) << " " << to_string(impl);
      GemmProblem fp32 = q;
      fp32.out_dtype = DType::kFP32;
      expect_error(impl_supported(fp32, impl, topo), ErrorCode::kUnsupported, {"dtype=e4m3", "this is out_dtype=fp32"});
    }
    expect_error(impl_supported(q, Impl::kFused, topo), ErrorCode::kUnsupported, {"dtype=e4m3"});
    if (op == Op::kGemmRs) {
      GemmProblem along_n = q;
      along_n.shard_dim = ShardDim::kN;
      expect_error(impl_supported(along_n, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported, {"this is shard_dim=n"});
    }
  }
  // The rules choose among what takes the types.
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr})
    for (DType out : {DType::kBF16, DType::kFP32}) {
      GemmProblem q = ag(16384, 8192, 8192);
      q.op = op;
      q.dtype = DType::kE4M3;
      q.out_dtype = out;
      const Impl chosen = choose(q, topo, {}).impl;
      EXPECT_TRUE(impl_supported(q, chosen, topo).ok()) << describe(q) << " chose " << to_string(chosen);
      if (op != Op::kAgGemm && out == DType::kFP32) {
        EXPECT_EQ(chosen, Impl::kBaseline) << describe(q);
      }
    }
}

// e5m2 (the gradient's FP8 type) beside e4m3: B's type of its own only between FP8 types, never
// e5m2 times e5m2 (cuBLASLt has no such matmul), the same implementations as e4m3, and the type
// in the problem's description (the tuning cache's key).
TEST(Fp8, E5m2TakesAnE4m3PartnerAndTheImplementationsOfE4m3) {
  EXPECT_EQ(parse_dtype("e5m2"), DType::kE5M2);
  EXPECT_EQ(parse_dtype("float8_e5m2"), DType::kE5M2);
  EXPECT_EQ(dtype_size(DType::kE5M2), 1u);
  EXPECT_TRUE(is_fp8(DType::kE5M2) && is_fp8(DType::kE4M3) && !is_fp8(DType::kBF16));
  GemmProblem p = ag(64, 64, 64);
  p.dtype = DType::kE5M2;
  p.out_dtype = DType::kBF16;
  expect_error(validate_problem(p, 2), ErrorCode::kUnsupported, {"dtype e5m2", "b_dtype e5m2", "expected b_dtype=e4m3"});
  p.b_dtype = DType::kE4M3;
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_EQ(b_dtype(p), DType::kE4M3);
  EXPECT_NE(describe(p).find("e5m2"), std::string::npos);
  EXPECT_NE(describe(p).find("b=e4m3"), std::string::npos) << describe(p);
  GemmProblem rev = p;
  rev.dtype = DType::kE4M3;
  rev.b_dtype = DType::kE5M2;
  EXPECT_TRUE(validate_problem(rev, 2).ok()) << describe(rev);
  GemmProblem plain = rev;
  plain.b_dtype.reset();
  EXPECT_NE(describe(plain), describe(rev)) << "e4m3 x e4m3 and e4m3 x e5m2 are two problems";
  GemmProblem mixed = ag(64, 64, 64);
  mixed.b_dtype = DType::kE4M3;
  expect_error(validate_problem(mixed, 2), ErrorCode::kUnsupported, {"b_dtype e4m3", "dtype bf16", "expected b_dtype bf16"});
  GemmProblem wide = p;
  wide.b_dtype = DType::kBF16;
  expect_error(validate_problem(wide, 2), ErrorCode::kUnsupported, {"b_dtype bf16", "dtype e5m2", "FP8 B"});
  const Topology topo{2, true};
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    GemmProblem q = p, e4 = p;
    q.op = e4.op = op;
    e4.dtype = DType::kE4M3;
    e4.b_dtype.reset();
    for (Impl impl : {Impl::kBaseline, Impl::kPipelinedCE, Impl::kGemmReduceScatter, Impl::kGemmOneShot,
                      Impl::kGemmTwoShot, Impl::kAllGatherGemm, Impl::kFused, Impl::kAuto})
      EXPECT_EQ(impl_supported(q, impl, topo).ok(), impl_supported(e4, impl, topo).ok())
          << describe(q) << " " << to_string(impl);
  }
  Topology ampere{2, true};
  ampere.fp8 = false;
  expect_error(impl_supported(p, Impl::kBaseline, ampere), ErrorCode::kUnsupported, {"e5m2", "FP8 tensor cores"});
}

// Row-wise e4m3 scales: a vector per operand sized by this rank's rows of A and columns of B,
// e4m3 and one batch entry only, the baseline's; the descriptor names the mode.
TEST(Fp8, RowWiseScalesAreVectorsTheBaselineAndPipelinedTake) {
  EXPECT_EQ(parse_scale_mode("row"), ScaleMode::kRow);
  EXPECT_EQ(parse_scale_mode("rowwise"), ScaleMode::kRow);
  EXPECT_EQ(parse_scale_mode("tensor"), ScaleMode::kTensor);
  EXPECT_FALSE(parse_scale_mode("column").has_value());
  GemmProblem p = ag(64, 64, 64);
  p.scale_mode = ScaleMode::kRow;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"scale_mode=row", "dtype bf16", "FP8 operands only"});
  p.dtype = DType::kE4M3;
  p.out_dtype = DType::kBF16;
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_NE(describe(p).find("scale=row"), std::string::npos) << describe(p);
  GemmProblem batched = p;
  batched.l = 2;
  expect_error(validate_problem(batched, 2), ErrorCode::kUnsupported, {"scale_mode=row", "L=2", "expected L=1"});
  // Sizes: ag_gemm along M holds M/W rows of A and all N columns of B; along N, M rows and N/W.
  EXPECT_EQ(operand_sizes(p, 2).a_scale, 32);
  EXPECT_EQ(operand_sizes(p, 2).b_scale, 64);
  GemmProblem along_n = p;
  along_n.shard_dim = ShardDim::kN;
  EXPECT_EQ(operand_sizes(along_n, 2).a_scale, 64);
  EXPECT_EQ(operand_sizes(along_n, 2).b_scale, 32);
  GemmProblem tensor = p;
  tensor.scale_mode = ScaleMode::kTensor;
  EXPECT_EQ(operand_sizes(tensor, 2).a_scale, 1);
  EXPECT_EQ(operand_sizes(ag(64, 64, 64), 2).a_scale, 0);
  // A scale vector inside D is an alias; one just past it is not.
  alignas(256) static char mem[1 << 20];
  Operands o{mem, mem + 65536, nullptr, mem + 131072};  // D: 64 x 64 bf16 = 8 KiB
  o.a_scale = reinterpret_cast<const float*>(mem + 131072 + 8192);
  o.b_scale = reinterpret_cast<const float*>(mem + 262144);
  EXPECT_TRUE(validate_operands(p, 2, o).ok());
  o.a_scale = reinterpret_cast<const float*>(mem + 131072 + 8192 - 16);
  expect_error(validate_operands(p, 2, o), ErrorCode::kInvalidArgument, {"overlaps a_scale"});
  o.a_scale = nullptr;
  expect_error(validate_operands(p, 2, o), ErrorCode::kInvalidArgument, {"a_scale is null", "scale_mode=row", "32 fp32"});
  const Topology topo{4, true};
  GemmProblem rs = p;
  rs.op = Op::kGemmRs;
  expect_error(impl_supported(rs, Impl::kFused, topo), ErrorCode::kUnsupported, {"scale_mode=row", "baseline"});
  EXPECT_TRUE(impl_supported(rs, Impl::kBaseline, topo).ok());
  EXPECT_TRUE(impl_supported(rs, Impl::kGemmReduceScatter, topo).ok());  // (one matmul over all of A)
  // pipelined_ce multiplies blocks of rows with their scales along M (NOTE [gathered scales]).
  EXPECT_TRUE(impl_supported(rs, Impl::kPipelinedCE, topo).ok());
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, topo).ok());
  expect_error(impl_supported(along_n, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported,
               {"scale_mode=row", "along M"});
}

// Block e4m3 scales (DeepSeek-V3's): per 1 x 128 block of this rank's A and 128 x 128 block of its
// B, B's rows of scales K/128 rounded up to 4 apart; e4m3 only, whole blocks of K, M a multiple of
// 4 (calls too), along N whole 128-row blocks per rank, one batch entry; the baseline's, gemm_rs's
// and gemm_ar's matmul-then-collective implementations', and pipelined_ce's along M in blocks of
// multiples of 4 rows.
TEST(Fp8, BlockScalesTakeWholeBlocksOfKInTheBaseline) {
  EXPECT_EQ(parse_scale_mode("block"), ScaleMode::kBlock);
  EXPECT_EQ(parse_scale_mode("blockwise"), ScaleMode::kBlock);
  EXPECT_EQ(to_string(ScaleMode::kBlock), "block");
  GemmProblem p = ag(512, 256, 384);
  p.scale_mode = ScaleMode::kBlock;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"scale_mode=block", "dtype bf16", "FP8 operands only"});
  p.dtype = DType::kE4M3;
  p.out_dtype = DType::kBF16;
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_NE(describe(p).find("scale=block"), std::string::npos) << describe(p);
  // Sizes: 3 blocks of K; ag_gemm along M holds M/W = 256 rows of A, and 2 blocks of B's 256 rows,
  // each a row of 3 scales padded to 4; along N, all 512 rows of A and its own 128 rows of B.
  EXPECT_EQ(scale_k_blocks(p), 3);
  EXPECT_EQ(b_scale_ld(p), 4);
  EXPECT_EQ(operand_sizes(p, 2).a_scale, 3 * 256);
  EXPECT_EQ(operand_sizes(p, 2).b_scale, 2 * 4);
  GemmProblem along_n = p;
  along_n.shard_dim = ShardDim::kN;
  EXPECT_TRUE(validate_problem(along_n, 2).ok());
  EXPECT_EQ(operand_sizes(along_n, 2).a_scale, 3 * 512);
  EXPECT_EQ(operand_sizes(along_n, 2).b_scale, 1 * 4);
  expect_error(validate_problem(along_n, 4), ErrorCode::kUnsupported, {"N=256", "shard_dim=n", "128 x W = 512"});
  GemmProblem whole = p;
  whole.k = 512;
  EXPECT_EQ(b_scale_ld(whole), 4);  // (a multiple of 4 blocks: no padding)
  // What it refuses, naming the value and what it expects.
  GemmProblem q = p;
  q.dtype = DType::kE5M2;
  q.b_dtype = DType::kE4M3;
  expect_error(validate_problem(q, 2), ErrorCode::kUnsupported, {"scale_mode=block", "dtype e5m2", "expected dtype=e4m3"});
  q = p;
  q.b_dtype = DType::kE5M2;
  expect_error(validate_problem(q, 2), ErrorCode::kUnsupported, {"scale_mode=block", "b_dtype e5m2"});
  q = p;
  q.k = 208;
  expect_error(validate_problem(q, 2), ErrorCode::kUnsupported, {"K=208", "scale_mode=block", "multiple of 128"});
  q = p;
  q.m = 510;
  expect_error(validate_problem(q, 2), ErrorCode::kUnsupported, {"M=510", "scale_mode=block", "multiple of 4"});
  q = p;
  q.l = 2;
  expect_error(validate_problem(q, 2), ErrorCode::kUnsupported, {"scale_mode=block", "L=2", "expected L=1"});
  expect_error(check_call_m(p, 2, 6), ErrorCode::kUnsupported, {"Operands::m=6", "scale_mode=block", "multiple of 4"});
  EXPECT_TRUE(check_call_m(p, 2, 8).ok());
  // Null scales are refused before anything runs, naming the count expected.
  alignas(256) static char mem[1 << 20];
  Operands o{mem, mem + 262144, nullptr, mem + 524288};
  o.a_scale = reinterpret_cast<const float*>(mem + 786432);
  o.b_scale = nullptr;
  expect_error(validate_operands(p, 2, o), ErrorCode::kInvalidArgument, {"b_scale is null", "scale_mode=block", "8 fp32"});
  o.b_scale = reinterpret_cast<const float*>(mem + 786432 + 4096);
  EXPECT_TRUE(validate_operands(p, 2, o).ok());
  o.a_scale = nullptr;
  expect_error(validate_operands(p, 2, o), ErrorCode::kInvalidArgument, {"a_scale is null", "scale_mode=block", "768 fp32"});
  // The baseline runs it, the matmul-then-collective implementations of gemm_rs and gemm_ar (one
  // matmul over all of A, no scales moved), and pipelined_ce along M where its matmuls take
  // multiples of 4 rows (NOTE [gathered scales]); auto chooses among them.
  const Topology topo{4, true};
  for (Op op : {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr}) {
    GemmProblem r = p;
    r.op = op;
    for (Impl impl : {Impl::kAllGatherGemm, Impl::kFused})
      expect_error(impl_supported(r, impl, topo), ErrorCode::kUnsupported, {"scale_mode=block", "baseline"});
    EXPECT_TRUE(impl_supported(r, Impl::kBaseline, topo).ok());
    EXPECT_TRUE(impl_supported(r, Impl::kPipelinedCE, topo).ok()) << describe(r);  // 128 rows per rank
    const Impl own = op == Op::kGemmRs ? Impl::kGemmReduceScatter : Impl::kGemmTwoShot;
    if (op != Op::kAgGemm) {
      EXPECT_TRUE(impl_supported(r, own, topo).ok()) << describe(r);
    }
    GemmProblem odd = r;
    odd.m = 4 * 130;  // 130 rows per rank block
    expect_error(impl_supported(odd, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported,
                 {"scale_mode=block", "M=520", "multiple of 4"});
    // Chunks that would cut a rank block off multiples of 4 rows are no candidates, and the
    // rules' default falls back to one.
    EXPECT_TRUE(pipelined_pieces_fit(r, 4, 2, 4));   // 64-row chunks
    EXPECT_FALSE(pipelined_pieces_fit(r, 4, 3, 4));  // 42, 43, 43
    for (const Choice& c : candidates(r, topo, {}, false))
      if (c.impl == Impl::kPipelinedCE) {
        EXPECT_TRUE(pipelined_pieces_fit(r, 4, c.chunks, 4)) << c.chunks;
      }
    PlanOptions three;
    three.chunks_per_rank = 3;  // auto with chunks pipelined_ce cannot take: something else
    const Choice c3 = choose(r, topo, three);
    EXPECT_TRUE(c3.impl != Impl::kPipelinedCE || pipelined_pieces_fit(r, 4, c3.chunks, 4)) << to_string(c3.impl);
  }
  GemmProblem rs_n = p;
  rs_n.op = Op::kGemmRs, rs_n.shard_dim = ShardDim::kN, rs_n.n = 512;
  expect_error(impl_supported(rs_n, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported, {"scale_mode=block"});
}

// A GPU without FP8 tensor cores (before compute capability 8.9) takes no e4m3, auto included.
TEST(Fp8, NeedsFp8TensorCores) {
  GemmProblem p = ag(64, 64, 64);
  p.dtype = DType::kE4M3;
  p.out_dtype = DType::kBF16;
  Topology ampere{2, true};
  ampere.all_sm90 = false;
  ampere.fp8 = false;
  for (Impl impl : {Impl::kAuto, Impl::kBaseline})
    expect_error(impl_supported(p, impl, ampere), ErrorCode::kUnsupported, {"e4m3", "FP8 tensor cores", "8.9"});
  EXPECT_TRUE(impl_supported(ag(64, 64, 64), Impl::kBaseline, ampere).ok());
}

TEST(ValidateOperands, NullMisalignedAndOverlapping) {
  GemmProblem p = ag(64, 64, 64);
  alignas(256) static char mem[1 << 20];
  Operands ok{mem, mem + 65536, nullptr, mem + 131072};
  EXPECT_TRUE(validate_operands(p, 2, ok).ok());
  Operands null_a = ok;
  null_a.a = nullptr;
  expect_error(validate_operands(p, 2, null_a), ErrorCode::kInvalidArgument, {"A is null"});
  Operands mis = ok;
  mis.b = mem + 65536 + 2;
  expect_error(validate_operands(p, 2, mis), ErrorCode::kInvalidArgument, {"B=", "16-byte aligned"});
  Operands overlap = ok;
  overlap.d = mem + 1024;  // inside A's 4 KiB shard ... A is 32x64x2 bytes
  expect_error(validate_operands(p, 2, overlap), ErrorCode::kInvalidArgument, {"overlaps A"});
  p.has_c = true;
  p.beta = 1.0f;
  expect_error(validate_operands(p, 2, ok), ErrorCode::kInvalidArgument, {"C is null"});
  Operands in_place = ok;
  in_place.c = ok.d;
  EXPECT_TRUE(validate_operands(p, 2, in_place).ok()) << "C == D is in-place accumulation";
  for (Op op : {Op::kGemmRs, Op::kGemmAr}) {
    p.op = op;
    expect_error(validate_operands(p, 2, in_place), ErrorCode::kInvalidArgument, {"C == D", "separate buffer"});
  }
}

TEST(ImplSupported, SymmetricPathsNeedNvlinkPeers) {
  GemmProblem p = ag(1024, 1024, 1024);
  const Topology nvlink{4, true}, split{4, false};
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, nvlink).ok());
  expect_error(impl_supported(p, Impl::kPipelinedCE, split), ErrorCode::kUnsupported, {"pipelined_ce", "LSA", "baseline"});
  EXPECT_TRUE(impl_supported(p, Impl::kBaseline, split).ok());
  expect_error(impl_supported(p, Impl::kGemmOneShot, nvlink), ErrorCode::kUnsupported, {"gemm_ar only"});
  EXPECT_TRUE(impl_supported(p, Impl::kFused, nvlink).ok());
  expect_error(impl_supported(p, Impl::kFused, split), ErrorCode::kUnsupported, {"fused", "LSA"});
  expect_error(impl_supported(p, Impl::kFused, {33, true}), ErrorCode::kUnsupported, {"fused", "32 ranks", "baseline"});
  // Every symmetric-memory implementation stops at 32 ranks (their barriers are one warp), not
  // only the GEMM core's: pipelined_ce too, and the baseline runs above.
  expect_error(impl_supported(p, Impl::kPipelinedCE, {33, true}), ErrorCode::kUnsupported, {"pipelined_ce", "32 ranks"});
  EXPECT_TRUE(impl_supported(p, Impl::kBaseline, {33, true}).ok());
  const Topology not_hopper{4, true, /*all_sm90=*/false};
  for (Impl core : {Impl::kFused, Impl::kGatherThenGemm})
    expect_error(impl_supported(p, core, not_hopper), ErrorCode::kUnsupported, {"sm_90", "pipelined_ce"});
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, not_hopper).ok());
  for (Impl rung : {Impl::kNaiveRemote, Impl::kThreadloadGather, Impl::kGatherThenGemm}) {
    const std::string name(to_string(rung));
    EXPECT_TRUE(impl_supported(p, rung, nvlink).ok()) << name;
    expect_error(impl_supported(p, rung, split), ErrorCode::kUnsupported, {name.c_str(), "LSA"});
    expect_error(impl_supported(p, rung, {33, true}), ErrorCode::kUnsupported, {name.c_str(), "32 ranks"});
  }
  expect_error(impl_supported(p, static_cast<Impl>(99), nvlink), ErrorCode::kUnsupported, {"99", "unknown"});
  p.op = Op::kGemmAr;
  EXPECT_TRUE(impl_supported(p, Impl::kGemmTwoShot, nvlink).ok());
  expect_error(impl_supported(p, Impl::kThreadloadGather, nvlink), ErrorCode::kUnsupported, {"threadload_gather", "ag_gemm only"});
  // fused gemm_rs: M = 1024 is whole 128-row tiles per rank at W=4 and 8, not at 16. gemm_ar's
  // owners take tile rows in turn: any M (NOTE [tile all-reduce]).
  for (Op op : {Op::kGemmAr, Op::kGemmRs}) {
    p.op = op;
    const std::string name(to_string(op));
    EXPECT_TRUE(impl_supported(p, Impl::kFused, nvlink).ok()) << name;
    EXPECT_TRUE(impl_supported(p, Impl::kFused, {8, true}).ok()) << name;
    if (op == Op::kGemmRs)
      expect_error(impl_supported(p, Impl::kFused, {16, true}), ErrorCode::kUnsupported,
                   {"fused", name.c_str(), "2048", "M=1024", "pipelined_ce"});
    else
      for (int64_t m : {int64_t(1024), int64_t(1), int64_t(1000), int64_t(8200)}) {
        p.m = m;
        EXPECT_TRUE(impl_supported(p, Impl::kFused, {16, true}).ok()) << name << " M=" << m;
      }
    p.m = 200;  // a team of one runs the GEMM core alone: any M
    EXPECT_TRUE(impl_supported(p, Impl::kFused, {1, true}).ok()) << name;
    p.m = 1024;
  }
  expect_error(impl_supported(p, Impl::kThreadloadGather, nvlink), ErrorCode::kUnsupported, {"ag_gemm only", "gemm_rs"});
  // fused gemm_ar up to 256 rows where M is not whole tiles per rank: its decode kernel, for M a
  // multiple of 16, N and K of 64, B as [N, K]. At W=2, 256 rows are whole tiles: the tile path,
  // whatever N, K and the layout.
  p.op = Op::kGemmAr;
  for (int64_t m : {16, 48, 128, 256}) {
    p.m = m;
    EXPECT_TRUE(fused_ar_decode(p, 4) && impl_supported(p, Impl::kFused, nvlink).ok()) << m;
    EXPECT_TRUE(fused_ar_decode(p, 16) && impl_supported(p, Impl::kFused, {16, true}).ok()) << m;
    EXPECT_EQ(fused_ar_decode(p, 2), m != 256) << m;
  }
  EXPECT_FALSE(fused_ar_decode(p, 1));  // a team of one: the GEMM core alone
  // Where the decode kernel does not apply (M not a multiple of 16, K not of 64, B as [K, N]), the
  // tile path takes the problem.
  p.m = 24;
  EXPECT_FALSE(fused_ar_decode(p, 4));
  EXPECT_TRUE(impl_supported(p, Impl::kFused, nvlink).ok());
  p.m = 16;
  p.k = 200;
  EXPECT_FALSE(fused_ar_decode(p, 4));
  EXPECT_TRUE(impl_supported(p, Impl::kFused, nvlink).ok());
  p.k = 256;
  p.b_layout = BLayout::kKN;
  EXPECT_FALSE(fused_ar_decode(p, 4));
  EXPECT_TRUE(impl_supported(p, Impl::kFused, nvlink).ok());
  p.m = 256;
  EXPECT_TRUE(impl_supported(p, Impl::kFused, {2, true}).ok());  // whole tiles per rank
  p.m = 16;
  p.b_layout = BLayout::kNK;
  expect_error(impl_supported(p, Impl::kFused, {4, true, /*all_sm90=*/false}), ErrorCode::kUnsupported, {"sm_90"});
  p.m = 1024;
  p.op = Op::kGemmRs;
  // gemm_reducescatter: gemm_rs only, along M or N, within the symmetric kernels' team size.
  EXPECT_TRUE(impl_supported(p, Impl::kGemmReduceScatter, nvlink).ok());
  expect_error(impl_supported(p, Impl::kGemmReduceScatter, split), ErrorCode::kUnsupported, {"gemm_reducescatter", "LSA"});
  expect_error(impl_supported(p, Impl::kGemmReduceScatter, {kMaxSymmetricWorld + 1, true}),
               ErrorCode::kUnsupported, {"gemm_reducescatter", "up to 32 ranks"});
  p.shard_dim = ShardDim::kN;
  EXPECT_TRUE(impl_supported(p, Impl::kGemmReduceScatter, nvlink).ok());
  p.shard_dim = ShardDim::kM;
  for (Op other : {Op::kAgGemm, Op::kGemmAr}) {
    p.op = other;
    expect_error(impl_supported(p, Impl::kGemmReduceScatter, nvlink), ErrorCode::kUnsupported, {"gemm_rs only"});
  }
  // allgather_gemm: ag_gemm only, along M only.
  p.op = Op::kAgGemm;
  EXPECT_TRUE(impl_supported(p, Impl::kAllGatherGemm, nvlink).ok());
  expect_error(impl_supported(p, Impl::kAllGatherGemm, split), ErrorCode::kUnsupported, {"allgather_gemm", "LSA"});
  p.shard_dim = ShardDim::kN;
  expect_error(impl_supported(p, Impl::kAllGatherGemm, nvlink), ErrorCode::kUnsupported, {"allgather_gemm", "along M only"});
  p.shard_dim = ShardDim::kM;
  p.op = Op::kGemmRs;
  expect_error(impl_supported(p, Impl::kAllGatherGemm, nvlink), ErrorCode::kUnsupported, {"ag_gemm only", "gemm_rs"});
}

}  // namespace
}  // namespace tpgemm::plan
