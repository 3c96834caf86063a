#include "plan/problem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "core/format.h"
#include "plan/schedule.h"

namespace tpgemm {

OperandSizes operand_sizes(const GemmProblem& p, int world) {
  OperandSizes s;
  // A and B from their first element to their last, rows `ld` apart (packed: ld = the row).
  // Every operand from its first element to its last: L - 1 batch strides and one entry.
  const plan::Extents e = plan::entry_extents(p, world);
  const auto batch = [&](int64_t entry, int64_t stride) { return entry > 0 ? (p.l - 1) * stride + entry : 0; };
  const int64_t ar = plan::a_rows(p, world), bc = plan::b_cols(p, world);
  s.a = batch(e.a, plan::a_batch_stride(p, world));
  s.b = batch(e.b, plan::b_batch_stride(p, world));
  s.d = batch(e.d, plan::d_batch_stride(p, world));
  s.c = p.has_c ? batch(e.c, plan::c_batch_stride(p, world)) : 0;
  if (is_fp8(p.dtype) && p.scale_mode == ScaleMode::kBlock) {
    s.a_scale = scale_k_blocks(p) * ar;
    s.b_scale = (bc + kScaleBlock - 1) / kScaleBlock * b_scale_ld(p);
  } else if (is_fp8(p.dtype)) {
    const bool row = p.scale_mode == ScaleMode::kRow;
    s.a_scale = row ? ar : 1;
    s.b_scale = row ? bc : 1;
  }
  return s;
}

namespace plan {
namespace {

// Largest single extent we accept (products are bounded separately in validate_problem).
constexpr int64_t kMaxExtent = int64_t(1) << 31;
// Largest batch stride, and extent of an operand with its batch strides, in elements.
constexpr int64_t kMaxBatchStride = int64_t(1) << 48;

bool overlaps(const void* p, int64_t bytes_p, const void* q, int64_t bytes_q) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return a < b + static_cast<uintptr_t>(bytes_q) && b < a + static_cast<uintptr_t>(bytes_p);
}

}  // namespace

RowBlock rank_block(int64_t m, int world, int rank) {
  const int64_t b = m * rank / world, e = m * (rank + 1) / world;
  return {b, e - b};
}

int64_t max_block_rows(int64_t m, int world) { return (m + world - 1) / world; }

RowBlock split_rows(int64_t rows, int parts, int part) {
  const int64_t b = rows * part / parts, e = rows * (part + 1) / parts;
  return {b, e - b};
}

namespace {
bool along_m(const GemmProblem& p) { return p.shard_dim == ShardDim::kM; }
}  // namespace

int64_t a_rows(const GemmProblem& p, int world) { return p.op == Op::kAgGemm && along_m(p) ? p.m / world : p.m; }
int64_t b_cols(const GemmProblem& p, int world) { return p.op == Op::kAgGemm && !along_m(p) ? p.n / world : p.n; }
int64_t d_rows(const GemmProblem& p, int world) { return p.op == Op::kGemmRs && along_m(p) ? p.m / world : p.m; }
int64_t d_cols(const GemmProblem& p, int world) { return p.op == Op::kGemmRs && !along_m(p) ? p.n / world : p.n; }

int64_t a_ld(const GemmProblem& p, int world) {
  return p.lda != 0 ? p.lda : p.a_layout == ALayout::kKM ? a_rows(p, world) : p.k;
}
int64_t b_ld(const GemmProblem& p, int world) {
  return p.ldb != 0 ? p.ldb : p.b_layout == BLayout::kKN ? b_cols(p, world) : p.k;
}
int64_t c_ld(const GemmProblem& p, int world) { return p.ldc != 0 ? p.ldc : d_cols(p, world); }
int64_t d_ld(const GemmProblem& p, int world) { return p.ldd != 0 ? p.ldd : d_cols(p, world); }
namespace {
// The rows of A and B as stored (a [K, M] A: K rows), and the rows of C and D.
int64_t a_stored_rows(const GemmProblem& p, int world) { return p.a_layout == ALayout::kKM ? p.k : a_rows(p, world); }
int64_t b_stored_rows(const GemmProblem& p, int world) { return p.b_layout == BLayout::kKN ? p.k : b_cols(p, world); }
// A batch stride as given, or the default: `rows` rows `ld` apart.
int64_t batch_stride_or(int64_t given, int64_t rows, int64_t ld) { return given != 0 ? given : rows * ld; }
// Whether entries of rows `row` long, `ld` apart, are packed. A batch stride given is a stride
// even where it equals the packed one at the plan's M: a call of fewer rows (Operands::m) keeps
// it, where the packed one would follow the call.
bool packed_entries(const GemmProblem& p, int64_t row, int64_t ld, int64_t given_batch_stride) {
  return ld == row && (p.l == 1 || given_batch_stride == 0);
}
}  // namespace

int64_t a_batch_stride(const GemmProblem& p, int world) {
  return batch_stride_or(p.batch_stride_a, a_stored_rows(p, world), a_ld(p, world));
}
int64_t b_batch_stride(const GemmProblem& p, int world) {
  return p.b_broadcast ? 0 : batch_stride_or(p.batch_stride_b, b_stored_rows(p, world), b_ld(p, world));
}
int64_t c_batch_stride(const GemmProblem& p, int world) {
  return batch_stride_or(p.batch_stride_c, d_rows(p, world), c_ld(p, world));
}
int64_t d_batch_stride(const GemmProblem& p, int world) {
  return batch_stride_or(p.batch_stride_d, d_rows(p, world), d_ld(p, world));
}
Extents entry_extents(const GemmProblem& p, int world) {
  const auto span = [](int64_t rows, int64_t row, int64_t ld) { return rows > 0 && row > 0 ? (rows - 1) * ld + row : 0; };
  const int64_t ar = a_stored_rows(p, world), br = b_stored_rows(p, world), dr = d_rows(p, world);
  const int64_t a_row = p.a_layout == ALayout::kKM ? a_rows(p, world) : p.k;
  const int64_t b_row = p.b_layout == BLayout::kKN ? b_cols(p, world) : p.k;
  return {span(ar, a_row, a_ld(p, world)), span(br, b_row, b_ld(p, world)), span(dr, d_cols(p, world), c_ld(p, world)),
          span(dr, d_cols(p, world), d_ld(p, world))};
}

bool packed_output(const GemmProblem& p, int world) {  // (a stride of a C not given is no stride)
  const int64_t cols = d_cols(p, world);
  return (!p.has_c || packed_entries(p, cols, c_ld(p, world), p.batch_stride_c)) &&
         packed_entries(p, cols, d_ld(p, world), p.batch_stride_d);
}
bool packed_operands(const GemmProblem& p, int world) {
  const int64_t b_row = p.b_layout == BLayout::kKN ? b_cols(p, world) : p.k;
  return p.a_layout == ALayout::kMK && packed_entries(p, p.k, a_ld(p, world), p.batch_stride_a) &&
         packed_entries(p, b_row, b_ld(p, world), p.batch_stride_b);
}

GemmProblem transposed(const GemmProblem& p) {
  GemmProblem t = p;
  t.m = p.n;
  t.n = p.m;
  t.b_layout = BLayout::kNK;  // B' = A, [M, K] row-major
  t.shard_dim = ShardDim::kM;
  return t;
}

namespace {

// NOTE [block scales through cuBLASLt]
// ScaleMode::kBlock is cuBLASLt's "128-element 1D and 128x128 2D block scaling" (cuBLAS docs,
// cublasLtMatmul, "Scaling factors layouts"; cuBLAS 12.9 and later, compute capability 9.0 only):
// with our operands swapped (NOTE [row-major through cuBLASLt]) its A, our B, takes
// BLK128x128_32F and its B, our A, VEC128_32F, a pair the docs list as supported. What we rely
// on from them: fp32 scales from 16-byte aligned addresses; the VEC128 scales of its B "N-major"
// (our A's rows contiguous, one run per K block); the BLK128x128 ones "K-major", their stride a
// multiple of 4 (K/128 rounded up to 4: b_scale_ld); its M and N, our N and M, multiples of 4;
// D in bf16, fp16 or fp32. The docs allow e5m2 and a K of partial blocks too; we take e4m3 only
// (torch's block-wise modes, and the tests' reference) and whole 128-column blocks of K, so that
// each rank's K shard of gemm_rs and gemm_ar holds whole blocks.
Status validate_block_scales(const GemmProblem& p, int world) {
  if (p.scale_mode != ScaleMode::kBlock) return Status::Ok();
  if (p.dtype != DType::kE4M3 || b_dtype(p) != DType::kE4M3)
    return unsupported(strfmt("scale_mode=block with dtype %s and b_dtype %s: block scales take e4m3 A and B; expected "
                              "dtype=e4m3 and b_dtype e4m3 or unset",
                              std::string(to_string(p.dtype)).c_str(), std::string(to_string(b_dtype(p))).c_str()));
  if (p.k % kScaleBlock != 0)
    return unsupported(strfmt("K=%lld with scale_mode=block: expected a multiple of %lld (whole blocks of K; for gemm_rs "
                              "and gemm_ar, this rank's shard)",
                              (long long)p.k, (long long)kScaleBlock));
  if (p.m % 4 != 0)
    return unsupported(strfmt("M=%lld with scale_mode=block: expected a multiple of 4 (cuBLASLt's block-scaled matmul "
                              "takes rows of A in multiples of 4)",
                              (long long)p.m));
  if (p.shard_dim == ShardDim::kN && p.n % (kScaleBlock * world) != 0)
    return unsupported(strfmt("N=%lld with scale_mode=block and shard_dim=n: expected a multiple of %lld x W = %lld "
                              "(each rank's columns whole 128-row blocks of B's scales)",
                              (long long)p.n, (long long)kScaleBlock, (long long)kScaleBlock * world));
  return Status::Ok();
}

}  // namespace

Status validate_problem(const GemmProblem& p, int world) {
  if (world < 1) return invalid(strfmt("world size %d: expected at least 1 rank", world));
  if (p.op != Op::kAgGemm && p.op != Op::kGemmRs && p.op != Op::kGemmAr)
    return unsupported(strfmt("op %d: expected ag_gemm, gemm_rs or gemm_ar", static_cast<int>(p.op)));
  const bool fp8 = is_fp8(p.dtype);
  if (p.dtype != DType::kBF16 && p.dtype != DType::kFP16 && !fp8)
    return unsupported(p.dtype == DType::kFP32
                           ? std::string("dtype fp32: expected bf16, fp16, e4m3 or e5m2 for A and B (fp32 is an "
                                         "output type: out_dtype=fp32)")
                           : strfmt("dtype %d: expected bf16, fp16, e4m3 or e5m2", static_cast<int>(p.dtype)));
  const std::string in(to_string(p.dtype));
  // A type's name, or its number where it has none (a value cast into the enum).
  const auto name_of = [](DType t) {
    return to_string(t) == "?" ? strfmt("%d", static_cast<int>(t)) : std::string(to_string(t));
  };
  if (p.b_dtype) {
    const DType b = *p.b_dtype;
    const std::string b_name = name_of(b);
    if (!fp8 && b != p.dtype)
      return unsupported(strfmt("b_dtype %s with dtype %s: B takes A's type unless both are FP8; expected b_dtype %s or "
                                "unset", b_name.c_str(), in.c_str(), in.c_str()));
    if (fp8 && !is_fp8(b))
      return unsupported(strfmt("b_dtype %s with dtype %s: an FP8 A takes an FP8 B; expected b_dtype e4m3 or e5m2",
                                b_name.c_str(), in.c_str()));
  }
  if (p.dtype == DType::kE5M2 && b_dtype(p) == DType::kE5M2)
    return unsupported("dtype e5m2 with b_dtype e5m2 (or unset): cuBLASLt's FP8 matmul has no e5m2 x e5m2; expected "
                       "b_dtype=e4m3 (or an e4m3 A)");
  const DType out = d_dtype(p);
  const std::string out_name = name_of(out);
  if (fp8 && out != DType::kBF16 && out != DType::kFP16 && out != DType::kFP32)
    return unsupported(strfmt("dtype %s with out_dtype %s: expected out_dtype bf16, fp16 or fp32 (D is never FP8; "
                              "set out_dtype)",
                              in.c_str(), p.out_dtype ? out_name.c_str() : "unset"));
  if (!fp8 && out != p.dtype && out != DType::kFP32) {
    return unsupported(strfmt("out_dtype %s with dtype %s: expected out_dtype %s (the input type) or fp32",
                              out_name.c_str(), in.c_str(), in.c_str()));
  }
  // cuBLASLt's FP8 matmul takes B as [N, K] ("TN", NOTE [row-major through cuBLASLt]) and rows of
  // A and B of a multiple of 16 elements (and of D: below, with the shard).
  if (fp8 && p.b_layout != BLayout::kNK)
    return unsupported(strfmt("dtype %s with b_layout=kn: FP8 matmuls take B as [N, K] row-major; expected b_layout=nk",
                              in.c_str()));
  if (fp8 && p.k % 16 != 0)
    return unsupported(strfmt("K=%lld with dtype %s: expected a multiple of 16 (FP8 rows of A and B)", (long long)p.k,
                              in.c_str()));
  if (p.scale_mode != ScaleMode::kTensor && p.scale_mode != ScaleMode::kRow && p.scale_mode != ScaleMode::kBlock)
    return unsupported(strfmt("scale_mode %d: expected tensor, row or block", static_cast<int>(p.scale_mode)));
  const std::string mode(to_string(p.scale_mode));
  if (p.scale_mode != ScaleMode::kTensor && !fp8)
    return invalid(strfmt("scale_mode=%s with dtype %s: scales apply to FP8 operands only; expected scale_mode=tensor",
                          mode.c_str(), in.c_str()));
  if (p.scale_mode != ScaleMode::kTensor && p.l != 1)
    return unsupported(strfmt("scale_mode=%s with L=%lld: %s scales take one batch entry; expected L=1", mode.c_str(),
                              (long long)p.l, p.scale_mode == ScaleMode::kRow ? "row-wise" : "block"));
  if (Status s = validate_block_scales(p, world); !s.ok()) return s;
  if (p.b_layout != BLayout::kKN && p.b_layout != BLayout::kNK)
    return unsupported(strfmt("B layout %d: expected kn ([K,N] row-major) or nk ([N,K] row-major)",
                              static_cast<int>(p.b_layout)));
  const struct { const char* name; int64_t v; } extents[] = {{"M", p.m}, {"N", p.n}, {"K", p.k}, {"L", p.l}};
  for (const auto& e : extents)
    if (e.v < 1 || e.v > kMaxExtent)
      return invalid(strfmt("%s=%lld: expected 1 <= %s <= 2^31", e.name, (long long)e.v, e.name));
  if (p.l > 65535) return invalid(strfmt("L=%lld: expected at most 65535 batch entries", (long long)p.l));
  if (p.b_broadcast && p.shard_dim != ShardDim::kM)
    return unsupported("b_broadcast with shard_dim=n: B is the sharded operand there, one per batch entry; expected "
                       "shard_dim=m, or L copies of B");
  // Every operand's element count must stay far inside int64 (and cuBLASLt's 64-bit strides).
  const double l = static_cast<double>(p.l), m = static_cast<double>(p.m), n = static_cast<double>(p.n),
               k = static_cast<double>(p.k);
  if (std::max({l * m * k, l * k * n, l * m * n}) > 0x1p50)
    return invalid(strfmt("M=%lld N=%lld K=%lld L=%lld: an operand of more than 2^50 elements", (long long)p.m,
                          (long long)p.n, (long long)p.k, (long long)p.l));
  if (p.n % 8 != 0)
    return unsupported(strfmt("N=%lld: expected a multiple of 8 (rows of D must be 16-byte multiples)", (long long)p.n));
  if (p.k % 8 != 0)
    return unsupported(strfmt("K=%lld: expected a multiple of 8 (rows of A must be 16-byte multiples)", (long long)p.k));
  if (p.shard_dim != ShardDim::kM && p.shard_dim != ShardDim::kN)
    return unsupported(strfmt("shard_dim %d: expected m or n", static_cast<int>(p.shard_dim)));
  if (p.shard_dim == ShardDim::kN && p.op == Op::kGemmAr)
    return invalid("shard_dim=n with gemm_ar: its D is whole on every rank, nothing is gathered or scattered; "
                   "expected shard_dim=m");
  if (p.shard_dim == ShardDim::kN && p.n % (8 * static_cast<int64_t>(world)) != 0)
    return invalid(strfmt("N=%lld with shard_dim=n: expected a multiple of 8 x W = %d (each rank's columns, in "
                          "16-byte rows)",
                          (long long)p.n, 8 * world));
  // cuBLASLt's FP8 matmul also takes D's rows (its M: NOTE [row-major through cuBLASLt]) only in
  // multiples of 16 elements, each rank's columns where they are split.
  const int64_t n_parts = p.shard_dim == ShardDim::kN ? world : 1;
  if (fp8 && p.n % (16 * n_parts) != 0)
    return unsupported(strfmt("N=%lld with dtype %s%s: expected a multiple of %lld (cuBLASLt's FP8 matmul takes "
                              "rows of D in multiples of 16 elements)",
                              (long long)p.n, in.c_str(), n_parts > 1 ? " and shard_dim=n" : "", (long long)(16 * n_parts)));
  if ((p.op == Op::kAgGemm || p.op == Op::kGemmRs) && along_m(p) && p.m % world != 0)
    return invalid(strfmt("M=%lld is not divisible by the world size W=%d: %s splits M evenly across ranks",
                          (long long)p.m, world, std::string(to_string(p.op)).c_str()));
  if (!std::isfinite(p.alpha) || !std::isfinite(p.beta))
    return invalid(strfmt("alpha=%g beta=%g: expected finite scalars", p.alpha, p.beta));
  if (p.beta != 0.0f && !p.has_c) return invalid(strfmt("beta=%g but has_c=false: beta scales C, so give C", p.beta));
  return validate_layouts(p, world);
}

Status validate_layouts(const GemmProblem& p, int world) {
  if (p.a_layout != ALayout::kMK && p.a_layout != ALayout::kKM)
    return unsupported(strfmt("a_layout %d: expected mk ([M, K] row-major) or km ([K, M])", static_cast<int>(p.a_layout)));
  if (p.a_layout == ALayout::kKM && is_fp8(p.dtype))
    return unsupported(strfmt("a_layout=km with dtype %s: FP8 matmuls take A as [M, K] row-major; expected a_layout=mk",
                              std::string(to_string(p.dtype)).c_str()));
  const int64_t es = static_cast<int64_t>(dtype_size(p.dtype));
  struct Stride { const char* name; int64_t ld, row; const char* row_is; int64_t es; bool of_d; };
  const bool km = p.a_layout == ALayout::kKM, kn = p.b_layout == BLayout::kKN;
  const int64_t ds = static_cast<int64_t>(dtype_size(d_dtype(p)));
  const Stride strides[] = {
      {"lda", p.lda, km ? a_rows(p, world) : p.k, km ? "this rank's rows of A (a_layout=km)" : "K", es, false},
      {"ldb", p.ldb, kn ? b_cols(p, world) : p.k, kn ? "this rank's columns of B (b_layout=kn)" : "K", es, false},
      {"ldc", p.ldc, d_cols(p, world), "this rank's columns of C and D", ds, true},
      {"ldd", p.ldd, d_cols(p, world), "this rank's columns of D", ds, true}};
  for (const Stride& s : strides) {
    if (s.ld == 0) continue;
    if (s.ld < 0 || s.ld > kMaxExtent)
      return invalid(strfmt("%s=%lld: expected 0 (packed) to 2^31", s.name, (long long)s.ld));
    if (s.ld < s.row)
      return invalid(strfmt("%s=%lld: expected 0 (packed) or at least %lld, %s", s.name, (long long)s.ld,
                            (long long)s.row, s.row_is));
    if (s.ld * s.es % 16 != 0)
      return invalid(strfmt("%s=%lld: expected a multiple of %lld elements (rows 16-byte aligned)", s.name,
                            (long long)s.ld, (long long)(16 / s.es)));
    // cuBLASLt's FP8 matmul takes rows of C and D in multiples of 16 elements (as it takes N).
    if (is_fp8(p.dtype) && s.of_d && s.ld % 16 != 0)
      return unsupported(strfmt("%s=%lld with dtype %s: expected a multiple of 16 elements (cuBLASLt's FP8 "
                                "matmul takes rows of C and D in multiples of 16)",
                                s.name, (long long)s.ld, std::string(to_string(p.dtype)).c_str()));
  }
  // A's rows as stored must start 16-byte aligned too where they are packed: as passed, and as
  // ag_gemm sends each rank's block of a [K, M] A (packed, whatever lda says).
  const bool packed_km = km && (p.lda == 0 || (p.op == Op::kAgGemm && p.shard_dim == ShardDim::kM));
  if (packed_km && a_rows(p, world) * es % 16 != 0)
    return invalid(strfmt("a_layout=km with %lld rows of A on this rank: expected a multiple of %lld (16-byte rows%s)",
                          (long long)a_rows(p, world), (long long)(16 / es),
                          p.lda == 0 ? "; or give lda" : ", as ag_gemm gathers them"));
  if (p.b_broadcast && p.batch_stride_b != 0)
    return invalid(strfmt("batch_stride_b=%lld with b_broadcast: one B for every batch entry is B's batch stride 0; "
                          "expected batch_stride_b=0",
                          (long long)p.batch_stride_b));
  // Batch strides: read with L > 1 only; an entry of D must not overlap the next (nor, to keep
  // one rule, any operand's).
  const Extents e = entry_extents(p, world);
  const Stride batches[] = {{"batch_stride_a", p.batch_stride_a, e.a, "an entry of A as stored ((rows - 1) x lda + row)", es, false},
                            {"batch_stride_b", p.batch_stride_b, e.b, "an entry of B as stored ((rows - 1) x ldb + row)", es, false},
                            {"batch_stride_c", p.batch_stride_c, e.c, "an entry of C ((rows - 1) x ldc + columns)", ds, true},
                            {"batch_stride_d", p.batch_stride_d, e.d, "an entry of D ((rows - 1) x ldd + columns)", ds, true}};
  for (const Stride& s : batches) {
    if (s.ld == 0) continue;
    if (s.ld < 0 || s.ld > kMaxBatchStride)
      return invalid(strfmt("%s=%lld: expected 0 (packed) to 2^48", s.name, (long long)s.ld));
    if (p.l == 1) continue;
    if (s.ld < s.row)
      return invalid(strfmt("%s=%lld with L=%lld: expected 0 (packed) or at least %lld elements, %s", s.name,
                            (long long)s.ld, (long long)p.l, (long long)s.row, s.row_is));
    if (s.ld * s.es % 16 != 0)
      return invalid(strfmt("%s=%lld: expected a multiple of %lld elements (entries 16-byte aligned)", s.name,
                            (long long)s.ld, (long long)(16 / s.es)));
    if ((p.l - 1) > kMaxBatchStride / s.ld)
      return invalid(strfmt("%s=%lld with L=%lld: the operand spans over 2^48 elements", s.name, (long long)s.ld,
                            (long long)p.l));
  }
  return Status::Ok();
}

namespace {
bool shards_m(const GemmProblem& p) { return p.op != Op::kGemmAr && p.shard_dim == ShardDim::kM; }
}  // namespace

Status check_call_m(const GemmProblem& p, int world, int64_t m) {
  if (m < 1 || m > p.m)
    return invalid(strfmt("Operands::m=%lld: expected 1 to the plan's M=%lld (0: the plan's M); make a plan for the "
                          "largest M it will see", (long long)m, (long long)p.m));
  if (shards_m(p) && m % world != 0)
    return invalid(strfmt("Operands::m=%lld: %s along M needs a multiple of W=%d (whole rows per rank)", (long long)m,
                          std::string(to_string(p.op)).c_str(), world));
  if (p.scale_mode == ScaleMode::kBlock && m % 4 != 0)
    return unsupported(strfmt("Operands::m=%lld with scale_mode=block: expected a multiple of 4 (cuBLASLt's "
                              "block-scaled matmul takes rows of A in multiples of 4)",
                              (long long)m));
  return Status::Ok();
}

int64_t range_top(const GemmProblem& p, int world, int64_t m) {
  if (m >= p.m) return p.m;
  const int64_t unit = shards_m(p) ? world : 1;
  int64_t top = unit;
  while (top < m) top *= 2;
  return std::min(top, p.m);
}

Status validate_operands(const GemmProblem& p, int world, const Operands& ops, bool gathered_a) {
  if (Status s = validate_layouts(p, world); !s.ok()) return s;
  const OperandSizes n = operand_sizes(p, world);
  const int64_t es = static_cast<int64_t>(dtype_size(p.dtype)), ds = static_cast<int64_t>(dtype_size(d_dtype(p)));
  struct Arg { const char* name; const void* ptr; int64_t bytes; };
  const Arg args[] = {{"A", ops.a, n.a * es}, {"B", ops.b, n.b * es}, {"C", ops.c, n.c * ds}, {"D", ops.d, n.d * ds}};
  for (const Arg& a : args) {
    if (a.name[0] == 'C' && !p.has_c) continue;
    if (a.ptr == nullptr) return invalid(strfmt("%s is null: expected a device pointer to %lld bytes", a.name, (long long)a.bytes));
    if (reinterpret_cast<uintptr_t>(a.ptr) % 16 != 0)
      return invalid(strfmt("%s=%p is not 16-byte aligned: tpgemm's kernels and cuBLASLt need 16-byte aligned operands",
                            a.name, a.ptr));
  }
  if (is_fp8(p.dtype)) {
    struct Scale { const char* name; const float* ptr; int64_t count; };
    for (const Scale& s : {Scale{"a_scale", ops.a_scale, n.a_scale}, Scale{"b_scale", ops.b_scale, n.b_scale}}) {
      const char* name = s.name;
      const float* scale = s.ptr;
      if (scale == nullptr)
        return invalid(p.scale_mode != ScaleMode::kTensor
                           ? strfmt("%s is null: dtype %s with scale_mode=%s needs a device pointer to %lld fp32 "
                                    "scales", name, std::string(to_string(p.dtype)).c_str(),
                                    std::string(to_string(p.scale_mode)).c_str(), (long long)s.count)
                           : strfmt("%s is null: dtype %s needs a device pointer to one fp32 scale per operand", name,
                                    std::string(to_string(p.dtype)).c_str()));
      if (reinterpret_cast<uintptr_t>(scale) % 16 != 0)
        return invalid(strfmt("%s=%p is not 16-byte aligned: cuBLASLt reads FP8 scales from 16-byte aligned "
                              "addresses (a tensor of its own is; a view at an offset may not be)",
                              name, static_cast<const void*>(scale)));
      if (overlaps(ops.d, args[3].bytes, scale, static_cast<int64_t>(sizeof(float)) * s.count))
        return invalid(strfmt("D=%p (%lld bytes) overlaps %s=%p: the output must not alias an input", ops.d,
                              (long long)args[3].bytes, name, static_cast<const void*>(scale)));
    }
  } else if (ops.a_scale != nullptr || ops.b_scale != nullptr) {
    return invalid(strfmt("a_scale or b_scale given with dtype %s: scales apply to FP8 operands only; pass null",
                          std::string(to_string(p.dtype)).c_str()));
  }
  for (const Arg& a : {args[0], args[1], args[2]}) {
    if (a.name[0] == 'C' && !p.has_c) continue;
    if (a.name[0] == 'C' && a.ptr == ops.d) {
      // In place is safe where each element of C is read before its D is written: ag_gemm's
      // matmul epilogue. gemm_rs and gemm_ar write D (the reduced sum) before they add C.
      const bool same_strides = plan::c_ld(p, world) == plan::d_ld(p, world) &&
                                (p.l == 1 || plan::c_batch_stride(p, world) == plan::d_batch_stride(p, world));
      if (p.op == Op::kAgGemm && same_strides) continue;
      if (p.op == Op::kAgGemm)
        return invalid(strfmt("C == D (in place) with ldc=%lld ldd=%lld, batch strides %lld and %lld: in place, C's "
                              "rows and entries are D's; expected ldc == ldd and batch_stride_c == batch_stride_d",
                              (long long)plan::c_ld(p, world), (long long)plan::d_ld(p, world),
                              (long long)plan::c_batch_stride(p, world), (long long)plan::d_batch_stride(p, world)));
      return invalid(strfmt("C == D (in place) with %s: D receives the reduced sum before C is added, so C must be "
                            "a separate buffer (in place is supported for ag_gemm)",
                            std::string(to_string(p.op)).c_str()));
    }
    if (overlaps(ops.d, args[3].bytes, a.ptr, a.bytes))
      return invalid(strfmt("D=%p (%lld bytes) overlaps %s=%p (%lld bytes): the output must not alias an input",
                            ops.d, (long long)args[3].bytes, a.name, a.ptr, (long long)a.bytes));
  }
  if (!gathered_a) return Status::Ok();
  const int64_t g_bytes = p.l * p.m * p.k * es;
  if (ops.a_gathered == nullptr)
    return invalid(strfmt("A_gathered is null but the plan returns the gathered A: expected a device pointer to %lld "
                          "bytes ([L, M, K])",
                          (long long)g_bytes));
  if (reinterpret_cast<uintptr_t>(ops.a_gathered) % 16 != 0)
    return invalid(strfmt("A_gathered=%p is not 16-byte aligned", ops.a_gathered));
  for (const Arg& a : args) {
    if (a.name[0] == 'C' && !p.has_c) continue;
    if (overlaps(ops.a_gathered, g_bytes, a.ptr, a.bytes))
      return invalid(strfmt("A_gathered=%p (%lld bytes) overlaps %s=%p (%lld bytes): expected a buffer of its own",
                            ops.a_gathered, (long long)g_bytes, a.name, a.ptr, (long long)a.bytes));
  }
  return Status::Ok();
}

double flops_per_rank(const GemmProblem& p) {
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) * static_cast<double>(p.l);
}

}  // namespace plan
}  // namespace tpgemm
