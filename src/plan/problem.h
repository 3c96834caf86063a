// Shapes, shards and argument checks of a tensor-parallel GEMM. Pure host logic.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "tpgemm/error.h"
#include "tpgemm/plan.h"
#include "tpgemm/types.h"
#include "plan/layouts.h"    // row and batch strides, for every includer of problem.h
#include "plan/supported.h"  // what each implementation takes (it was declared here)

namespace tpgemm::plan {

// The rows of D (global numbering) that rank `rank` owns after a reduce-scatter, or whose A
// rows it holds before an all-gather. Blocks are as even as possible; ag_gemm and gemm_rs
// along M require M % W == 0, so there they are exactly M / W (along N, the same for N).
struct RowBlock {
  int64_t begin = 0;
  int64_t rows = 0;
};
RowBlock rank_block(int64_t m, int world, int rank);
int64_t max_block_rows(int64_t m, int world);

// Part `part` of `parts` of `rows` rows, as even as possible (may be empty when rows < parts).
RowBlock split_rows(int64_t rows, int parts, int part);

// Rows of A, columns of B, and rows and columns of C and D, as this rank passes them.
int64_t a_rows(const GemmProblem& p, int world);
int64_t b_cols(const GemmProblem& p, int world);
int64_t d_rows(const GemmProblem& p, int world);
int64_t d_cols(const GemmProblem& p, int world);

// NOTE [shard along N]
// ag_gemm and gemm_rs along N are ag_gemm and gemm_rs along M of the transposed product,
// D^T = B^T A^T: B's columns play A's rows. transposed(p) is that problem (shard_dim kM, M and N
// swapped), and the pipelined schedule of p is the one of transposed(p), proven on the CPU like
// any other. Only its matmul steps read differently: "rows [r0, r0 + n) of D^T = A'^T rows x B'"
// runs as D[:, r0 : r0 + n] = A x (columns r0.. of B). Every other step (copies, reduction) moves
// a region whole, so a region holding a column block of D stores it as the [M, n] row-major
// matrix it is; the caller's D is written in place, with D's own row length. That needs whole
// column blocks per step: along N, pipelined_ce takes one chunk per rank.
GemmProblem transposed(const GemmProblem& p);

// A refused problem's status: an argument the caller got wrong, or one tpgemm does not take.
inline Status invalid(std::string msg) { return {ErrorCode::kInvalidArgument, std::move(msg)}; }
inline Status unsupported(std::string msg) { return {ErrorCode::kUnsupported, std::move(msg)}; }

// Checks that do not depend on the data pointers: sizes, divisibility, dtype, layout, scalars.
Status validate_problem(const GemmProblem& p, int world);
// Checks of one call's pointers: non-null, 16-byte aligned, D not overlapping A, B or C
// (C == D exactly is allowed for ag_gemm: in-place accumulation).
// With `gathered_a` (PlanOptions::return_gathered_a) also Operands::a_gathered.
Status validate_operands(const GemmProblem& p, int world, const Operands& ops, bool gathered_a = false);

// The step between the Ms of calls of p (Operands::m): W where the op shards M (ag_gemm and
// gemm_rs along M), else 1.
int64_t call_m_unit(const GemmProblem& p, int world);
// The M of one call (Operands::m) against the plan's problem: 1 to p.m, and a multiple of
// call_m_unit.
Status check_call_m(const GemmProblem& p, int world, int64_t m);
// The M of the implementation a call of `m` rows runs (Plan::run): the plan's own for m == p.m,
// else the top of m's range, the least u x 2^j >= m (u: call_m_unit), at most p.m. A range holds
// the Ms above half its top (and u itself).
int64_t range_top(const GemmProblem& p, int world, int64_t m);
// The least M of the range whose top is `top` (a value range_top returns).
int64_t range_bottom(const GemmProblem& p, int world, int64_t top);
// An M a call of the range topped by p.m may have (check_call_m, and the layouts' rules at that
// M) near its middle: the range's choice is timed on calls of it. p.m where none below is.
int64_t range_middle(const GemmProblem& p, int world);

double flops_per_rank(const GemmProblem& p);

}  // namespace tpgemm::plan
