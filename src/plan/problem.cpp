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
    return unsupported(strfmt("N=%lld with shard_dim=n: expected a multiple of 8 x W = %d (each rank's columns, in "
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

int64_t call_m_unit(const GemmProblem& p, int world) {
  return p.op != Op::kGemmAr && p.shard_dim == ShardDim::kM ? world : 1;
}

Status check_call_m(const GemmProblem& p, int world, int64_t m) {
  if (m < 1 || m > p.m)
    return invalid(strfmt("Operands::m=%lld: expected 1 to the plan's M=%lld (0: the plan's M); make a plan for the "
                          "largest M it will see", (long long)m, (long long)p.m));
  if (m % call_m_unit(p, world) != 0)
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
  const int64_t unit = call_m_unit(p, world);
  int64_t top = unit;
  while (top < m) top *= 2;
  return std::min(top, p.m);
}

int64_t range_bottom(const GemmProblem& p, int world, int64_t top) {
  const int64_t unit = call_m_unit(p, world);
  int64_t below = unit;  // the largest u x 2^j under top, the top of the range before
  while (below * 2 < top) below *= 2;
  return top <= unit ? unit : below + unit;
}

int64_t range_middle(const GemmProblem& p, int world) {
  const int64_t unit = call_m_unit(p, world), bottom = range_bottom(p, world, p.m);
  for (int64_t m = std::max(bottom, (bottom + p.m) / 2 / unit * unit); m >= bottom; m -= unit) {
    GemmProblem q = p;
    q.m = m;
    if (check_call_m(p, world, m).ok() && validate_layouts(q, world).ok()) return m;
  }
  return p.m;
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
