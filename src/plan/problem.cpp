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
  const auto span = [](int64_t rows, int64_t row, int64_t ld) { return rows > 0 ? (rows - 1) * ld + row : 0; };
  const int64_t ar = plan::a_rows(p, world), bc = plan::b_cols(p, world);
  s.a = p.l * (p.a_layout == ALayout::kKM ? span(p.k, ar, plan::a_ld(p, world)) : span(ar, p.k, plan::a_ld(p, world)));
  s.b = (p.b_broadcast ? 1 : p.l) *
        (p.b_layout == BLayout::kKN ? span(p.k, bc, plan::b_ld(p, world)) : span(bc, p.k, plan::b_ld(p, world)));
  const int64_t dr = plan::d_rows(p, world), dc = plan::d_cols(p, world);
  s.d = p.l * span(dr, dc, plan::d_ld(p, world));
  s.c = p.has_c ? p.l * span(dr, dc, plan::c_ld(p, world)) : 0;
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

Status invalid(std::string msg) { return {ErrorCode::kInvalidArgument, std::move(msg)}; }
Status unsupported(std::string msg) { return {ErrorCode::kUnsupported, std::move(msg)}; }

// Largest single extent we accept (products are bounded separately in validate_problem).
constexpr int64_t kMaxExtent = int64_t(1) << 31;

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
bool packed_output(const GemmProblem& p, int world) {  // (a stride of a C not given is no stride)
  return (!p.has_c || c_ld(p, world) == d_cols(p, world)) && d_ld(p, world) == d_cols(p, world);
}
bool packed_operands(const GemmProblem& p, int world) {
  const int64_t b_row = p.b_layout == BLayout::kKN ? b_cols(p, world) : p.k;
  return p.a_layout == ALayout::kMK && (p.lda == 0 || p.lda == p.k) && (p.ldb == 0 || p.ldb == b_row);
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
  if (!packed_operands(p, world) && p.l != 1)
    return unsupported(strfmt("L=%lld with a_layout=%s lda=%lld ldb=%lld: A and B other than packed take one batch "
                              "entry; expected L=1",
                              (long long)p.l, std::string(to_string(p.a_layout)).c_str(), (long long)p.lda,
                              (long long)p.ldb));
  if (!packed_output(p, world) && p.l != 1)
    return unsupported(strfmt("L=%lld with ldc=%lld ldd=%lld: C and D other than packed take one batch entry; "
                              "expected L=1",
                              (long long)p.l, (long long)p.ldc, (long long)p.ldd));
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
      if (p.op == Op::kAgGemm && plan::c_ld(p, world) == plan::d_ld(p, world)) continue;
      if (p.op == Op::kAgGemm)
        return invalid(strfmt("C == D (in place) with ldc=%lld and ldd=%lld: in place, C's rows are D's; expected "
                              "ldc == ldd",
                              (long long)plan::c_ld(p, world), (long long)plan::d_ld(p, world)));
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

Status gathered_a_supported(const GemmProblem& p, Impl impl) {
  if (p.op != Op::kAgGemm || p.shard_dim != ShardDim::kM)
    return invalid(strfmt("return_gathered_a with %s%s: only ag_gemm along M gathers A",
                          std::string(to_string(p.op)).c_str(), p.shard_dim == ShardDim::kN ? " (shard_dim=n)" : ""));
  if (p.a_layout != ALayout::kMK)
    return unsupported("return_gathered_a with a_layout=km: the gathered A is rows of [M, K]; expected a_layout=mk");
  switch (impl) {
    case Impl::kAuto:
    case Impl::kBaseline:
    case Impl::kPipelinedCE:
    case Impl::kFused:
    case Impl::kAllGatherGemm: return Status::Ok();
    default:
      return unsupported(strfmt("impl %s does not return the gathered A; use auto, baseline, pipelined_ce, fused or "
                                "allgather_gemm",
                                std::string(to_string(impl)).c_str()));
  }
}

Status impl_supported(const GemmProblem& p, Impl impl, const Topology& topo) {
  const std::string name(to_string(impl)), op(to_string(p.op));
  if (name == "?") return unsupported(strfmt("impl %d: unknown implementation", static_cast<int>(impl)));
  // The types first, whatever the shape. FP8 A and B: the implementations whose matmuls are
  // cuBLASLt's and whose communication moves D (gemm_rs and gemm_ar, along M) take them into a
  // 16-bit D with tensor-wise scales; ag_gemm's gather must carry every rank's scale, which the
  // baseline and pipelined_ce along M do (NOTE [gathered scales]); row-wise and block scales follow
  // the rows through the baseline's collectives and pipelined_ce's chunks along M (gemm_rs and
  // gemm_ar move no scales: the matmul-then-collective ones take both).
  // pipelined_ce's ag_gemm along M writes D by matmuls alone, so it takes any output type.
  if (is_fp8(p.dtype) && !topo.fp8)
    return unsupported(strfmt("dtype %s needs FP8 tensor cores (compute capability 8.9 or newer), and this rank's GPU "
                              "has none; expected bf16 or fp16",
                              std::string(to_string(p.dtype)).c_str()));
  if (is_fp8(p.dtype) && p.scale_mode == ScaleMode::kBlock && !topo.all_sm90)  // NOTE [block scales through cuBLASLt]
    return unsupported("scale_mode=block: cuBLASLt's block-scaled FP8 matmul runs on Hopper (compute capability 9.0) "
                       "only, and not every rank's GPU is one; expected scale_mode=tensor or row");
  // pipelined_ce along M reads and writes the caller's rows at their strides (copies of A's rows
  // as 2D copies; ag_gemm's A stored [K, M] gathered as [K, M], blocks of its columns), and
  // multiplies blocks of rows with their row-wise scales (NOTE [gathered scales]). The matmul-then-collective
  // implementations of gemm_rs and gemm_ar read A and B in place with one matmul over all of A
  // (per rank block along N), so with every scale mode, and write D packed.
  const bool pipelined_m = impl == Impl::kPipelinedCE && p.shard_dim == ShardDim::kM;
  const bool matmul_first = impl == Impl::kGemmReduceScatter || impl == Impl::kGemmOneShot || impl == Impl::kGemmTwoShot;
  const bool strides_taken = impl == Impl::kAuto || impl == Impl::kBaseline ||
                             pipelined_m;
  if (!packed_operands(p, topo.world) && !strides_taken && !matmul_first)
    return unsupported(strfmt("impl %s takes A and B packed (a_layout=mk, lda and ldb 0), and this problem has "
                              "a_layout=%s lda=%lld ldb=%lld; use impl=baseline or auto (pipelined_ce takes them along "
                              "M; so do gemm_reducescatter, gemm_oneshot and gemm_twoshot)",
                              name.c_str(), std::string(to_string(p.a_layout)).c_str(), (long long)p.lda,
                              (long long)p.ldb));
  if (!packed_output(p, topo.world) && !strides_taken)
    return unsupported(strfmt("impl %s writes D packed (ldc and ldd 0), and this problem has ldc=%lld ldd=%lld; use "
                              "impl=baseline or auto (pipelined_ce takes them along M)",
                              name.c_str(), (long long)p.ldc, (long long)p.ldd));
  // One B for the whole batch: the implementations whose matmuls are cuBLASLt's, with B's batch
  // stride 0.
  if (p.b_broadcast && p.l > 1 && impl != Impl::kAuto && impl != Impl::kBaseline && !pipelined_m && !matmul_first)
    return unsupported(strfmt("impl %s takes one B per batch entry, and this problem has b_broadcast with L=%lld; use "
                              "impl=baseline, pipelined_ce, gemm_reducescatter, gemm_oneshot, gemm_twoshot or auto",
                              name.c_str(), (long long)p.l));
  const bool scales_taken = impl == Impl::kAuto || impl == Impl::kBaseline || matmul_first || pipelined_m;
  if (p.scale_mode != ScaleMode::kTensor && !scales_taken)
    return unsupported(strfmt("impl %s does not take scale_mode=%s (row-wise and block FP8 scales run in the "
                              "baseline, gemm_reducescatter, gemm_oneshot, gemm_twoshot and pipelined_ce along M); use "
                              "impl=baseline or auto",
                              name.c_str(), std::string(to_string(p.scale_mode)).c_str()));
  const bool moves_products = impl == Impl::kPipelinedCE || impl == Impl::kGemmReduceScatter ||
                              impl == Impl::kGemmOneShot || impl == Impl::kGemmTwoShot;
  const bool fp8_products = is_fp8(p.dtype) && (p.op == Op::kGemmRs || p.op == Op::kGemmAr) &&
                            p.shard_dim == ShardDim::kM && d_dtype(p) != DType::kFP32 && moves_products;
  const bool gathers_a = p.op == Op::kAgGemm && p.shard_dim == ShardDim::kM && impl == Impl::kPipelinedCE;
  if (is_fp8(p.dtype) && impl != Impl::kAuto && impl != Impl::kBaseline && !fp8_products && !gathers_a) {
    if (!moves_products)
      return unsupported(strfmt("impl %s takes bf16 or fp16 A and B, and dtype=%s (FP8 runs in the baseline, for "
                                "ag_gemm along M also in pipelined_ce, and for gemm_rs and gemm_ar along M into a bf16 "
                                "or fp16 D also in pipelined_ce, gemm_reducescatter, gemm_oneshot and gemm_twoshot); "
                                "use impl=baseline or auto",
                                name.c_str(), std::string(to_string(p.dtype)).c_str()));
    const std::string why = p.shard_dim != ShardDim::kM ? std::string("shard_dim=n")
                            : p.op == Op::kAgGemm      ? std::string("ag_gemm (its gather must carry every rank's scale)")
                                                       : std::string("out_dtype=fp32");
    return unsupported(strfmt("impl %s takes dtype=%s only for gemm_rs and gemm_ar along M into a bf16 or fp16 D "
                              "(pipelined_ce: ag_gemm along M too), and this is %s; use impl=baseline or auto",
                              name.c_str(), std::string(to_string(p.dtype)).c_str(), why.c_str()));
  }
  if (d_dtype(p) != p.dtype && impl != Impl::kAuto && impl != Impl::kBaseline && !fp8_products && !gathers_a)
    return unsupported(strfmt("impl %s writes D in the input type (%s), and out_dtype=%s; use impl=baseline or auto",
                              name.c_str(), std::string(to_string(p.dtype)).c_str(),
                              std::string(to_string(d_dtype(p))).c_str()));
  if (p.shard_dim == ShardDim::kN && impl != Impl::kAuto && impl != Impl::kBaseline && impl != Impl::kPipelinedCE &&
      impl != Impl::kGemmReduceScatter)
    return unsupported(strfmt("impl %s works along M only, and this %s has shard_dim=n; use impl=pipelined_ce or "
                              "baseline",
                              name.c_str(), op.c_str()));
  if (impl != Impl::kAuto && impl != Impl::kBaseline && topo.world > kMaxSymmetricWorld)
    return unsupported(strfmt("impl %s supports teams of up to %d ranks, and this one has %d; use impl=baseline",
                              name.c_str(), kMaxSymmetricWorld, topo.world));
  switch (impl) {
    case Impl::kAuto:
    case Impl::kBaseline: return Status::Ok();
    case Impl::kPipelinedCE:
      // Its schedule gives every rank a block of rows to reduce (or gather, or own).
      if (p.m < topo.world)
        return unsupported(strfmt("impl pipelined_ce needs at least one row per rank, and M=%lld at W=%d; use "
                                  "impl=auto",
                                  (long long)p.m, topo.world));
      // Its matmuls take blocks of whole rank blocks at least (NOTE [gathered scales]).
      if (is_fp8(p.dtype) && p.scale_mode == ScaleMode::kBlock && p.shard_dim == ShardDim::kM &&
          !pipelined_pieces_fit(p, topo.world, 1, 4))
        return unsupported(strfmt("impl pipelined_ce with scale_mode=block multiplies each rank block of M=%lld at W=%d "
                                  "in one matmul, and cuBLASLt's block-scaled matmul takes multiples of 4 rows; expected "
                                  "M/W rows per rank a multiple of 4 (gemm_ar: M a multiple of 4 x W), or impl=auto",
                                  (long long)p.m, topo.world));
      break;
    case Impl::kGemmOneShot:
    case Impl::kGemmTwoShot:
    case Impl::kGemmReduceScatter:
    case Impl::kAllGatherGemm: {
      const Op for_op = impl == Impl::kGemmReduceScatter ? Op::kGemmRs : impl == Impl::kAllGatherGemm ? Op::kAgGemm : Op::kGemmAr;
      if (p.op != for_op)
        return unsupported(strfmt("impl %s exists for %s only, not %s", name.c_str(), std::string(to_string(for_op)).c_str(),
                                  op.c_str()));
      break;
    }
    case Impl::kFused:
    case Impl::kNaiveRemote:
    case Impl::kThreadloadGather:
    case Impl::kGatherThenGemm:
      if (impl == Impl::kFused && p.op != Op::kAgGemm) {
        // Its reduction takes whole 128-row tiles of the GEMM per rank (NOTE [tile reduce]); gemm_ar
        // also runs its decode kernel (NOTE [fused decode]) where that does not hold.
        if (topo.world > 1 && p.m % (128 * static_cast<int64_t>(topo.world)) != 0 && !fused_ar_decode(p, topo.world))
          return unsupported(
              p.op == Op::kGemmRs
                  ? strfmt("impl fused for gemm_rs needs M to be a multiple of 128 x W = %lld (whole 128-row tiles "
                           "per rank), and M=%lld; use impl=pipelined_ce",
                           128 * static_cast<long long>(topo.world), (long long)p.m)
                  : strfmt("impl fused for gemm_ar needs M to be a multiple of 128 x W = %lld (whole 128-row tiles "
                           "per rank) or, for its decode kernel, at most %lld rows, a multiple of 16, with N and K "
                           "multiples of 64 and b_layout=nk; got M=%lld N=%lld K=%lld b_layout=%s; use "
                           "impl=gemm_twoshot",
                           128 * static_cast<long long>(topo.world), (long long)kFusedDecodeMaxM, (long long)p.m,
                           (long long)p.n, (long long)p.k, std::string(to_string(p.b_layout)).c_str()));
      } else if (p.op != Op::kAgGemm) {
        return unsupported(strfmt("impl %s exists for ag_gemm only, not %s", name.c_str(), op.c_str()));
      }
      if ((impl == Impl::kFused || impl == Impl::kGatherThenGemm) && !topo.all_sm90)
        return unsupported(strfmt("impl %s runs kernels built for sm_90 only (tpgemm's Hopper GEMM core, or "
                                  "gemm_ar's decode kernel), and this team's GPUs are not all sm_90; use "
                                  "impl=pipelined_ce",
                                  name.c_str()));
      // The GEMM core's own limits (gemm/sm90_config.h): TMA rows of 16 bytes, 32-bit extents.
      if ((impl == Impl::kFused || impl == Impl::kGatherThenGemm) &&
          (p.n % 8 != 0 || p.k % 8 != 0 || p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.l > INT32_MAX))
        return unsupported(strfmt("impl %s needs N and K multiples of 8 and M, N, K, L below 2^31 (got N=%lld "
                                  "K=%lld); use impl=pipelined_ce",
                                  name.c_str(), (long long)p.n, (long long)p.k));
      break;
  }
  if (topo.world > 1 && !topo.all_lsa_peers)
    return unsupported(strfmt("impl %s needs every rank to be an NVLink load/store (LSA) peer with P2P access, "
                              "and this team of %d ranks is not; use impl=baseline",
                              name.c_str(), topo.world));
  return Status::Ok();
}

double flops_per_rank(const GemmProblem& p) {
  return 2.0 * static_cast<double>(p.m) * static_cast<double>(p.n) * static_cast<double>(p.k) * static_cast<double>(p.l);
}

}  // namespace plan
}  // namespace tpgemm
