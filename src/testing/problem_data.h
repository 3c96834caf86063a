// Reproducible operands of a tensor-parallel GEMM, and the expected result of any rank.
//
// NOTE [reproducible problem data]
// Every operand is a function of (seed, rank): ag_gemm's A is one global matrix of which rank
// r holds row block r; gemm_rs's and gemm_ar's A and B are rank r's own (its K shard); B of
// ag_gemm and every C belong to their rank. Along N, ag_gemm's A is its rank's own, and its B
// rank r's block of columns (generated per rank: each block's own packed matrix). So each rank can regenerate every other rank's
// operands on its own GPU and build its expected D alone, and a fresh seed gives fresh data.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/cuda_raii.h"
#include "testing/testing.h"
#include "tpgemm/plan.h"

namespace tpgemm::testing {

// Operands of one rank, allocated and filled.
struct RankData {
  RankData(const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream);
  void refill(uint64_t seed, cudaStream_t stream);  // new A, B and C (and e4m3 scales); D untouched
  Operands operands() const;

  GemmProblem p;
  int world, rank;
  DeviceBuffer a, b, c, d;
  // e4m3: this rank's a_scale and b_scale (one value each, or as the scale mode lays them out), each
  // from a 16-byte boundary (cuBLASLt reads scales from 16-byte aligned addresses)
  static constexpr int kScaleSlot = 4;
  DeviceBuffer scales;
  int64_t b_scale_offset = 0;  // floats from the start of `scales`
};

// The scales of rank `rank`'s e4m3 A and B for `seed` (1 for other types): a few values, exact in
// fp32 and different across ranks, so that a gathered operand's blocks differ in scale.
float a_scale_of(const GemmProblem& p, int rank, uint64_t seed);
float b_scale_of(const GemmProblem& p, int rank, uint64_t seed);
// Row-wise e4m3 (ScaleMode::kRow): the scale of row `row` of rank `rank`'s A as that rank holds
// it, and of column `col` of D from its B (its block's column, along N): exact in fp32, varying
// along rows, columns and ranks.
float a_row_scale_of(int rank, int64_t row, uint64_t seed);
float b_col_scale_of(int rank, int64_t col, uint64_t seed);

// Block e4m3 (ScaleMode::kBlock): the scale of rank `rank`'s A at its row `row` (as that rank holds
// it) and K block `kb`, and of its B's 128 x 128 block (nb, kb) (of its own rows of B): exact in fp32,
// varying along rows, blocks and ranks. The stride's padding of B's scales (types.h) holds NaN,
// so that reading it shows.
float a_block_scale_of(int rank, int64_t row, int64_t kb, uint64_t seed);
float b_block_scale_of(int rank, int64_t nb, int64_t kb, uint64_t seed);

void fill_a(void* a, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream);
// ag_gemm along M: the whole A of which every rank holds a block of rows, packed [L, M, K] (what
// PlanOptions::return_gathered_a writes).
void fill_gathered_a(void* a, const GemmProblem& p, uint64_t seed, cudaStream_t stream);
// (b_broadcast: one B; with every_batch, as the reference reads it, that B in every batch entry)
void fill_b(void* b, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream,
            bool every_batch = false);
void fill_c(void* c, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream);

// Rank `rank`'s expected D in fp32 (shaped like its D), from every rank's operands for `seed`.
DeviceBuffer expected_d(const GemmProblem& p, int world, int rank, uint64_t seed, RefEngine engine, cublasLtHandle_t lt,
                        cudaStream_t stream);

// D against the expectation (synchronises the stream); with a row stride (GemmProblem::ldd),
// its rows, and the elements between them, which the run was given as poison, must still be.
Diff compare_d(const void* d, const DeviceBuffer& expected, const GemmProblem& p, int world, cudaStream_t stream);

}  // namespace tpgemm::testing
