// Layouts beyond packed on the host: A stored [K, M], row and batch strides, a batch sharing one B:
// sizes, validation and which implementations take them.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "plan/choose.h"
#include "plan/problem.h"
#include "plan/schedule.h"
#include "support/host_problems.h"

namespace tpgemm::plan {
namespace {

using testhost::ag;
using testhost::expect_error;

// A stored [K, M] and rows with strides: sizes from the first element to the last, strides at
// least the row and 16-byte aligned, e4m3 only as [M, K], the baseline,
// pipelined_ce along M and the matmul-then-collective ones. C and D with row strides (ldc, ldd): at
// least this rank's columns of D, 16-byte rows in D's type; sized from the first
// element to the last; the baseline's and pipelined_ce's along M; an ag_gemm C == D in place only
// where the two strides agree.
TEST(Layouts, StridedCAndDValidateAndSize) {
  GemmProblem p = ag(64, 48, 40);  // bf16 D; W=2
  p.op = Op::kGemmRs;              // this rank's D: 32 x 48
  EXPECT_TRUE(packed_output(p, 2));
  p.ldd = 48;  // the packed row, given
  EXPECT_TRUE(packed_output(p, 2));
  p.ldd = 64;
  EXPECT_FALSE(packed_output(p, 2));
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_NE(describe(p).find("ldd=64"), std::string::npos) << describe(p);
  EXPECT_EQ(operand_sizes(p, 2).d, 31 * 64 + 48);
  p.has_c = true, p.beta = 1.0f, p.ldc = 56;
  EXPECT_EQ(operand_sizes(p, 2).c, 31 * 56 + 48);
  p.ldc = 40;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"ldc=40", "at least 48", "columns of C and D"});
  p.ldc = 52;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"ldc=52", "multiple of 8"});
  GemmProblem f32 = p;
  f32.ldc = 52, f32.out_dtype = DType::kFP32;  // 4-float rows are 16 bytes
  EXPECT_TRUE(validate_problem(f32, 2).ok()) << describe(f32);
  p.ldc = 0;
  GemmProblem along_n = p;  // gemm_rs along N: this rank's columns, 48 / 2
  along_n.shard_dim = ShardDim::kN;
  along_n.n = 48, along_n.ldd = 24;
  EXPECT_TRUE(packed_output(along_n, 2));
  along_n.ldd = 16;
  expect_error(validate_problem(along_n, 2), ErrorCode::kInvalidArgument, {"ldd=16", "at least 24"});
  GemmProblem batched = p;  // entries of strided rows: 32 rows 64 apart each
  batched.l = 2;
  EXPECT_TRUE(validate_problem(batched, 2).ok()) << describe(batched);
  EXPECT_EQ(d_batch_stride(batched, 2), 32 * 64);
  EXPECT_EQ(operand_sizes(batched, 2).d, 32 * 64 + 31 * 64 + 48);
  GemmProblem no_c = batched;  // a stride for a C not given is no stride
  no_c.has_c = false, no_c.beta = 0.0f, no_c.ldc = 56, no_c.ldd = 0;
  EXPECT_TRUE(packed_output(no_c, 2));
  EXPECT_TRUE(validate_problem(no_c, 2).ok()) << describe(no_c);
  GemmProblem fp8 = p;  // cuBLASLt's FP8 matmul: rows of C and D in multiples of 16 elements
  fp8.dtype = DType::kE4M3, fp8.out_dtype = DType::kBF16, fp8.n = 64, fp8.k = 64, fp8.ldd = 72;
  expect_error(validate_problem(fp8, 2), ErrorCode::kUnsupported, {"ldd=72", "e4m3", "multiple of 16"});
  fp8.ldd = 80;
  EXPECT_TRUE(validate_problem(fp8, 2).ok()) << describe(fp8);
  GemmProblem huge = p;
  huge.ldd = int64_t(1) << 40;
  expect_error(validate_problem(huge, 2), ErrorCode::kInvalidArgument, {"ldd=", "2^31"});
  const Topology topo{2, true};
  for (Impl impl : {Impl::kFused, Impl::kGemmReduceScatter})
    expect_error(impl_supported(p, impl, topo), ErrorCode::kUnsupported, {"writes D packed", "ldd=64", "baseline"});
  EXPECT_TRUE(impl_supported(p, Impl::kBaseline, topo).ok());
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, topo).ok());  // along M
  along_n.ldd = 32;
  expect_error(impl_supported(along_n, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported,
               {"writes D packed", "ldd=32", "along M"});
  // ag_gemm in place (C == D): one stride for both.
  alignas(256) static char mem[1 << 20];
  GemmProblem in_place = ag(64, 48, 40);
  in_place.has_c = true, in_place.beta = 1.0f, in_place.ldd = 64;
  Operands o{mem, mem + 65536, mem + 131072, mem + 131072};
  expect_error(validate_operands(in_place, 2, o), ErrorCode::kInvalidArgument, {"C == D", "ldc=48", "ldd=64"});
  in_place.ldc = 64;
  EXPECT_TRUE(validate_operands(in_place, 2, o).ok());
  in_place.l = 2, in_place.batch_stride_d = 64 * 64 + 64;  // and one batch stride
  expect_error(validate_operands(in_place, 2, o), ErrorCode::kInvalidArgument, {"C == D", "4096 and 4160"});
  in_place.batch_stride_c = 64 * 64 + 64;
  EXPECT_TRUE(validate_operands(in_place, 2, o).ok());
}

// One B for a batch (b_broadcast): B counts once, the problem says so, along M only, and the
// implementations whose matmuls are cuBLASLt's take it.
// Strided rows widen an operand beyond its packed size: it too must stay within 2^50 elements
// (a byte count of it in int64).
TEST(Layouts, AStridedOperandStaysBounded) {
  GemmProblem p;
  p.op = Op::kGemmAr;
  p.m = int64_t(1) << 31, p.n = 8, p.k = 8;  // packed: 2^34 elements of A
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  p.lda = int64_t(1) << 31;  // as stored: 2^62
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"A spans", "at most 2^50"});
  p.lda = 0, p.ldd = int64_t(1) << 30;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"D spans", "at most 2^50"});
}

TEST(Layouts, ABatchSharesOneB) {
  GemmProblem p = ag(64, 48, 40);  // W=2: 32 rows of A per rank
  p.l = 3;
  EXPECT_EQ(operand_sizes(p, 2).b, 3 * 48 * 40);
  p.b_broadcast = true;
  EXPECT_EQ(operand_sizes(p, 2).b, 48 * 40);
  EXPECT_EQ(operand_sizes(p, 2).a, 3 * 32 * 40);
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_NE(describe(p).find("b_broadcast"), std::string::npos) << describe(p);
  const Topology topo{2, true};
  for (Impl impl : {Impl::kBaseline, Impl::kPipelinedCE, Impl::kAuto}) EXPECT_TRUE(impl_supported(p, impl, topo).ok());
  for (Impl impl : {Impl::kFused, Impl::kAllGatherGemm, Impl::kGatherThenGemm})
    expect_error(impl_supported(p, impl, topo), ErrorCode::kUnsupported, {"b_broadcast", "L=3", "pipelined_ce"});
  GemmProblem ar = p;
  ar.op = Op::kGemmAr;
  EXPECT_TRUE(impl_supported(ar, Impl::kGemmTwoShot, topo).ok());
  GemmProblem along_n = p;
  along_n.shard_dim = ShardDim::kN;
  expect_error(validate_problem(along_n, 2), ErrorCode::kUnsupported, {"b_broadcast", "shard_dim=n"});
}

TEST(Layouts, StridesAndTransposedAValidateAndSize) {
  EXPECT_EQ(parse_a_layout("km"), ALayout::kKM);
  EXPECT_FALSE(parse_a_layout("t").has_value());
  GemmProblem p = ag(64, 48, 40);  // bf16; W=2: 32 rows of A per rank
  p.op = Op::kGemmRs;
  EXPECT_TRUE(packed_operands(p, 2));
  p.lda = 40;  // the packed row, given
  EXPECT_TRUE(packed_operands(p, 2));
  EXPECT_TRUE(validate_problem(p, 2).ok());
  p.lda = 56;
  EXPECT_FALSE(packed_operands(p, 2));
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_NE(describe(p).find("lda=56"), std::string::npos) << describe(p);
  EXPECT_EQ(operand_sizes(p, 2).a, 63 * 56 + 40);
  p.lda = 32;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"lda=32", "at least 40", "K"});
  p.lda = 44;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"lda=44", "multiple of 8"});
  p.lda = 0;
  p.ldb = 48;  // B [N, K]: K=40 per row; 48 apart
  EXPECT_EQ(operand_sizes(p, 2).b, 47 * 48 + 40);
  p.b_layout = BLayout::kKN;  // B [K, N]: N=48 per row, so 48 is packed
  EXPECT_TRUE(packed_operands(p, 2));
  p.ldb = 40;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"ldb=40", "at least 48", "columns of B"});
  p.ldb = 0;
  p.b_layout = BLayout::kNK;
  // A as [K, M]: this rank's rows are the row; packed, they must make 16-byte rows.
  p.a_layout = ALayout::kKM;
  EXPECT_FALSE(packed_operands(p, 2));
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_NE(describe(p).find("A=km"), std::string::npos);
  EXPECT_EQ(operand_sizes(p, 2).a, 40 * 64);
  GemmProblem ag_km = p;
  ag_km.op = Op::kAgGemm;  // 32 rows of A on each of 2 ranks
  EXPECT_EQ(operand_sizes(ag_km, 2).a, 40 * 32);
  ag_km.m = 2 * 36;  // 36 rows per rank: 72 bytes, not 16-byte rows
  expect_error(validate_problem(ag_km, 2), ErrorCode::kInvalidArgument, {"a_layout=km", "36 rows", "multiple of 8", "lda"});
  ag_km.lda = 40;  // a stride does not help: ag_gemm gathers each rank's block packed
  expect_error(validate_problem(ag_km, 2), ErrorCode::kInvalidArgument, {"36 rows", "as ag_gemm gathers them"});
  GemmProblem rs_km = ag_km;
  rs_km.op = Op::kGemmRs;  // read in place: the stride is what counts
  rs_km.m = 36;
  rs_km.shard_dim = ShardDim::kN;
  rs_km.n = 64;
  EXPECT_TRUE(validate_problem(rs_km, 2).ok()) << describe(rs_km);
  EXPECT_EQ(operand_sizes(rs_km, 2).a, 39 * 40 + 36);
  ag_km.m = 2 * 32, ag_km.lda = 40;
  EXPECT_TRUE(validate_problem(ag_km, 2).ok());
  expect_error(gathered_a_supported(ag_km, Impl::kBaseline), ErrorCode::kUnsupported, {"a_layout=km"});
  GemmProblem huge = ag_km;
  huge.lda = int64_t(1) << 40;
  expect_error(validate_problem(huge, 2), ErrorCode::kInvalidArgument, {"lda=", "2^31"});
  GemmProblem batched = p;  // two [K, M] entries
  batched.l = 2;
  EXPECT_TRUE(validate_problem(batched, 2).ok()) << describe(batched);
  EXPECT_EQ(operand_sizes(batched, 2).a, 2 * 40 * 64);
  GemmProblem fp8 = p;
  fp8.dtype = DType::kE4M3;
  fp8.out_dtype = DType::kBF16;
  fp8.n = 64, fp8.k = 64;
  expect_error(validate_problem(fp8, 2), ErrorCode::kUnsupported, {"a_layout=km", "e4m3"});
  // The baseline, auto, pipelined_ce along M (which reads A in place, and gathers ag_gemm's A as
  // [K, M]) and gemm_reducescatter (one matmul of A in place).
  const Topology topo{2, true};
  expect_error(impl_supported(p, Impl::kFused, topo), ErrorCode::kUnsupported, {"packed", "a_layout=km", "baseline"});
  EXPECT_TRUE(impl_supported(p, Impl::kGemmReduceScatter, topo).ok());
  EXPECT_TRUE(impl_supported(p, Impl::kBaseline, topo).ok());
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, topo).ok());
  EXPECT_TRUE(impl_supported(ag_km, Impl::kPipelinedCE, topo).ok());
  expect_error(impl_supported(ag_km, Impl::kAllGatherGemm, topo), ErrorCode::kUnsupported, {"packed", "a_layout=km"});
  GemmProblem strided_ag = ag(64, 48, 40);
  strided_ag.lda = 48;
  EXPECT_TRUE(impl_supported(strided_ag, Impl::kPipelinedCE, topo).ok());
  strided_ag.shard_dim = ShardDim::kN;
  expect_error(impl_supported(strided_ag, Impl::kPipelinedCE, topo), ErrorCode::kUnsupported, {"packed", "lda=48"});
  // Per call: a packed [K, M] A's rows follow the call's M.
  EXPECT_TRUE(validate_layouts(p, 2).ok());
  GemmProblem call = p;
  call.m = 37;
  expect_error(validate_layouts(call, 2), ErrorCode::kInvalidArgument, {"37 rows"});
}

// Batch strides (L > 1): by default an entry's stored rows times their stride; given, at least an
// entry's extent and 16-byte aligned (not read with L = 1), a stride even where it is the packed
// one (calls of fewer rows keep it); sizes
// span L - 1 strides and one entry; B's is 0 with b_broadcast and may not be given beside it; the
// implementations that take row strides take them, those that write D packed refuse D's naming it.
TEST(Layouts, BatchStridesValidateAndSize) {
  const Topology topo{2, true};
  GemmProblem p = ag(64, 48, 40);  // bf16; W=2
  p.op = Op::kGemmRs;              // A 64 x 40, B 48 x 40, D 32 x 48 per entry
  p.l = 3;
  EXPECT_EQ(a_batch_stride(p, 2), 64 * 40);
  EXPECT_EQ(b_batch_stride(p, 2), 48 * 40);
  EXPECT_EQ(d_batch_stride(p, 2), 32 * 48);
  p.batch_stride_a = 64 * 40;  // the packed stride, given: a stride all the same, which a call of
  EXPECT_FALSE(packed_operands(p, 2));  // fewer rows keeps (the packed one would follow the call)
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  GemmProblem ar = p;  // gemm_ar: a call of 100 of 128 rows runs the implementation made for 128
  ar.op = Op::kGemmAr, ar.m = 128, ar.batch_stride_a = 0, ar.batch_stride_d = 128 * 48;
  GemmProblem call = ar;
  call.m = 100;
  EXPECT_EQ(range_top(ar, 2, call.m), 128);
  EXPECT_FALSE(packed_output(ar, 2));
  EXPECT_FALSE(packed_output(call, 2));
  EXPECT_EQ(d_batch_stride(call, 2), 128 * 48);
  ar.batch_stride_d = call.batch_stride_d = 0;  // the default follows the call
  EXPECT_TRUE(packed_output(ar, 2));
  EXPECT_EQ(d_batch_stride(call, 2), 100 * 48);
  p.batch_stride_a = 64 * 40 + 8;
  EXPECT_FALSE(packed_operands(p, 2));
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  EXPECT_NE(describe(p).find("batch_stride_a=2568"), std::string::npos) << describe(p);
  EXPECT_EQ(operand_sizes(p, 2).a, 2 * 2568 + 64 * 40);
  EXPECT_TRUE(impl_supported(p, Impl::kGemmReduceScatter, topo).ok());  // reads A in place
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, topo).ok());
  expect_error(impl_supported(p, Impl::kFused, topo), ErrorCode::kUnsupported, {"packed", "batch_stride_a=2568"});
  p.batch_stride_a = 64 * 40 - 8;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument,
               {"batch_stride_a=2552", "L=3", "at least 2560", "an entry of A"});
  p.batch_stride_a = 64 * 40 + 4;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"batch_stride_a=2564", "multiple of 8"});
  p.batch_stride_a = -8;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"batch_stride_a=-8", "2^48"});
  GemmProblem one = p;  // one entry: not read
  one.l = 1, one.batch_stride_a = 4;
  EXPECT_TRUE(validate_problem(one, 2).ok()) << describe(one);
  EXPECT_TRUE(packed_operands(one, 2));
  GemmProblem huge = p;
  huge.l = 5, huge.batch_stride_a = int64_t(1) << 47;
  expect_error(validate_problem(huge, 2), ErrorCode::kInvalidArgument, {"batch_stride_a=", "2^48"});
  p.batch_stride_a = 0;
  // Strided rows, default entries: rows x lda apart, an entry's extent past the last.
  p.lda = 48;
  EXPECT_EQ(a_batch_stride(p, 2), 64 * 48);
  EXPECT_EQ(operand_sizes(p, 2).a, 2 * 64 * 48 + 63 * 48 + 40);
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  p.batch_stride_a = 63 * 48 + 40;  // (rows - 1) x lda + K, the least: entries touching
  EXPECT_TRUE(validate_problem(p, 2).ok()) << describe(p);
  p.lda = 0, p.batch_stride_a = 0;
  // D's and C's.
  p.batch_stride_d = 32 * 48 + 16;
  EXPECT_FALSE(packed_output(p, 2));
  EXPECT_EQ(operand_sizes(p, 2).d, 2 * (32 * 48 + 16) + 32 * 48);
  EXPECT_TRUE(impl_supported(p, Impl::kBaseline, topo).ok());
  EXPECT_TRUE(impl_supported(p, Impl::kPipelinedCE, topo).ok());
  expect_error(impl_supported(p, Impl::kGemmReduceScatter, topo), ErrorCode::kUnsupported,
               {"writes D packed", "batch_stride_d=1552"});
  p.batch_stride_d = 0;
  p.has_c = true, p.beta = 1.0f, p.batch_stride_c = 32 * 48 - 8;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"batch_stride_c=1528", "an entry of C"});
  p.has_c = false, p.beta = 0.0f, p.batch_stride_c = 0;
  // One B for the batch: its stride is 0 and is not given.
  p.b_broadcast = true;
  EXPECT_EQ(b_batch_stride(p, 2), 0);
  EXPECT_EQ(operand_sizes(p, 2).b, 48 * 40);
  EXPECT_TRUE(packed_operands(p, 2));
  p.batch_stride_b = 48 * 40;
  expect_error(validate_problem(p, 2), ErrorCode::kInvalidArgument, {"batch_stride_b=1920", "b_broadcast"});
}

}  // namespace
}  // namespace tpgemm::plan
