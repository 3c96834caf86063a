// The FP8 scales of A behind each of pipelined_ce's matmuls, which multiply blocks of A's rows.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <vector>

#include "comm/symmetric.h"
#include "comm/team_state.h"
#include "core/cuda_raii.h"
#include "plan/schedule.h"
#include "tpgemm/types.h"

namespace tpgemm::detail {

// NOTE [gathered scales]
// Each chunk matmul needs the scales of the rows it multiplies, laid out for those rows alone, from
// a 16-byte aligned address: cuBLASLt reads a scale, and vectors and blocks of them, only from one.
//   tensor-wise  The caller's scale; for ag_gemm's gathered rows, the scale of the rank that sent
//                them. It travels like the rows: pushed from that rank's scale into its slot of
//                the peer's symmetric table just before the first rows pushed there, on the same
//                stream, so every matmul that waits for those rows (their arrival flag follows
//                them) also sees it. One 16-byte slot per rank.
//   row-wise,    A's scales are rows of values, one value per row of A: a single such row
//   block        (row-wise), or one per 128 columns of K (block scales, K block by K block). A
//                block of A's rows needs its values of each row of them. The caller's scales serve
//                as they are where they are the block's already (row-wise: at the block's first
//                row, where that is aligned; block scales: the block is all of this rank's rows);
//                else a copy laid out for the block, made by one kernel on the caller's stream at
//                the start of the call. ag_gemm's gathered rows: every chunk's scales are pushed
//                with it (before its rows, on the same stream, a 2D copy) into its own aligned
//                slot of the peer's table; the slots follow from the schedule's chunks, the same
//                on every rank. Block scales also need every block a multiple of 4 rows
//                (cuBLASLt's block-scaled matmul): plan::pipelined_pieces_fit.
// Barrier 0 of the next call keeps a slot until its rank has multiplied with it, as it does the rows.
class PipelinedScales {
 public:
  PipelinedScales() = default;
  // Local: where each matmul's scales will be (`schedule` is this rank's of `p`). Throws
  // Unsupported where block scales meet a block of rows that is not a multiple of 4.
  PipelinedScales(const GemmProblem& p, int world, int rank, const plan::Schedule& schedule);
  // Collective where ag_gemm's FP8 A is gathered (the table is symmetric memory), else nothing.
  void make_table(const std::shared_ptr<TeamState>& team);

  // The start of a call: the caller's scales, and the copies of the blocks that need one.
  void begin_call(const float* a_scale, cudaStream_t stream);
  // Before `copy` (a step of the schedule): the scales that go with its rows, if any.
  void push(const plan::Step& copy, cudaStream_t stream);
  // The scales of the rows of A that a matmul multiplies.
  const float* of(const plan::Region& a) const;

 private:
  bool in_place(const plan::Region& a) const;  // the caller's scales serve block `a` as they are

  int rank_ = 0, world_ = 1;
  bool gather_ = false;  // ag_gemm along M with FP8 A on two or more ranks
  bool vectors_ = false;  // row-wise or block scales
  bool block_ = false;
  int64_t rows_per_rank_ = 0;  // ag_gemm: M / W
  int64_t a_rows_ = 0;         // this rank's rows of A: the length of each row of its scales
  int64_t k_blocks_ = 1;       // rows of A's scales (block: K / 128)
  int64_t table_floats_ = 0;
  const float* a_scale_ = nullptr;  // the call's
  comm::SymmetricBuffer table_;  // gathered rows' scales: tensor-wise a slot per rank; else per chunk
  std::map<int64_t, int64_t> gathered_at_;  // a gathered chunk's first row -> its slot (floats)
  DeviceBuffer staged_;                     // the copies of the caller's scales per block
  std::map<int64_t, int64_t> staged_at_;    // a block of the caller's rows: first row -> its copy
  DeviceBuffer pieces_;                     // the copies to make (ops::ScalePiece), on the GPU
  int piece_count_ = 0;
  std::vector<bool> pushed_;  // tensor-wise: this call's pushes so far, by rank
};

}  // namespace tpgemm::detail
