// Operand layouts beyond packed: row strides, batch strides and their checks. Pure host logic.
#pragma once

#include <cstdint>

#include "tpgemm/error.h"
#include "tpgemm/types.h"

namespace tpgemm::plan {

// Largest single extent we accept (products are bounded separately in validate_problem).
constexpr int64_t kMaxExtent = int64_t(1) << 31;
// Largest batch stride, and extent of an operand with its batch strides, in elements.
constexpr int64_t kMaxBatchStride = int64_t(1) << 48;

// The rows of A and B as this rank stores them (A as [K, M], B as [K, N]: K rows), and their
// length (what a row stride of 0 means).
int64_t a_stored_rows(const GemmProblem& p, int world);
int64_t a_stored_row(const GemmProblem& p, int world);
int64_t b_stored_rows(const GemmProblem& p, int world);
int64_t b_stored_row(const GemmProblem& p, int world);

// The row strides of A and B as this rank passes them (GemmProblem::lda, ldb, or the packed row's
// length), and whether both are packed in the default layouts, rows and batch entries (what every
// implementation takes).
int64_t a_ld(const GemmProblem& p, int world);
int64_t b_ld(const GemmProblem& p, int world);
bool packed_operands(const GemmProblem& p, int world);
// Likewise C's and D's (GemmProblem::ldc, ldd, or this rank's columns of D), and whether both are
// packed, rows and batch entries (what every implementation but the baseline and pipelined_ce
// along M writes).
int64_t c_ld(const GemmProblem& p, int world);
int64_t d_ld(const GemmProblem& p, int world);
bool packed_output(const GemmProblem& p, int world);
// Elements between batch entries of A, B, C and D as this rank passes them
// (GemmProblem::batch_stride_a.., or an entry's stored rows times their row stride; B's is 0 with
// b_broadcast), and the extent of one entry ((rows - 1) x ld + row as stored).
int64_t a_batch_stride(const GemmProblem& p, int world);
int64_t b_batch_stride(const GemmProblem& p, int world);
int64_t c_batch_stride(const GemmProblem& p, int world);
int64_t d_batch_stride(const GemmProblem& p, int world);
struct Extents {
  int64_t a = 0, b = 0, c = 0, d = 0;
};
Extents entry_extents(const GemmProblem& p, int world);

// validate_problem's checks of a_layout, the row strides and the batch strides (also per call: a
// packed [K, M] A's rows follow the call's M).
Status validate_layouts(const GemmProblem& p, int world);

}  // namespace tpgemm::plan
