#include "plan/layouts.h"

#include <string>

#include "core/format.h"
#include "plan/problem.h"

namespace tpgemm::plan {

int64_t a_stored_rows(const GemmProblem& p, int world) { return p.a_layout == ALayout::kKM ? p.k : a_rows(p, world); }
int64_t a_stored_row(const GemmProblem& p, int world) { return p.a_layout == ALayout::kKM ? a_rows(p, world) : p.k; }
int64_t b_stored_rows(const GemmProblem& p, int world) { return p.b_layout == BLayout::kKN ? p.k : b_cols(p, world); }
int64_t b_stored_row(const GemmProblem& p, int world) { return p.b_layout == BLayout::kKN ? b_cols(p, world) : p.k; }

int64_t a_ld(const GemmProblem& p, int world) { return p.lda != 0 ? p.lda : a_stored_row(p, world); }
int64_t b_ld(const GemmProblem& p, int world) { return p.ldb != 0 ? p.ldb : b_stored_row(p, world); }
int64_t c_ld(const GemmProblem& p, int world) { return p.ldc != 0 ? p.ldc : d_cols(p, world); }
int64_t d_ld(const GemmProblem& p, int world) { return p.ldd != 0 ? p.ldd : d_cols(p, world); }
namespace {
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
  const int64_t dr = d_rows(p, world);
  return {span(a_stored_rows(p, world), a_stored_row(p, world), a_ld(p, world)),
          span(b_stored_rows(p, world), b_stored_row(p, world), b_ld(p, world)), span(dr, d_cols(p, world), c_ld(p, world)),
          span(dr, d_cols(p, world), d_ld(p, world))};
}

bool packed_output(const GemmProblem& p, int world) {  // (a stride of a C not given is no stride)
  const int64_t cols = d_cols(p, world);
  return (!p.has_c || packed_entries(p, cols, c_ld(p, world), p.batch_stride_c)) &&
         packed_entries(p, cols, d_ld(p, world), p.batch_stride_d);
}
bool packed_operands(const GemmProblem& p, int world) {
  return p.a_layout == ALayout::kMK && packed_entries(p, p.k, a_ld(p, world), p.batch_stride_a) &&
         packed_entries(p, b_stored_row(p, world), b_ld(p, world), p.batch_stride_b);
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
      {"lda", p.lda, a_stored_row(p, world), km ? "this rank's rows of A (a_layout=km)" : "K", es, false},
      {"ldb", p.ldb, b_stored_row(p, world), kn ? "this rank's columns of B (b_layout=kn)" : "K", es, false},
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
  // An entry as stored, its rows at their stride, stays far inside int64 bytes (as the packed
  // operands do: validate_problem).
  for (const auto& [name, extent] : {std::pair{"A", e.a}, std::pair{"B", e.b}, std::pair{"C", e.c}, std::pair{"D", e.d}})
    if (extent > (int64_t(1) << 50))
      return invalid(strfmt("%s spans %lld elements as stored (its rows at their stride): expected at most 2^50", name,
                            (long long)extent));
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

}  // namespace tpgemm::plan
