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
// Each chunk matmul needs the scales of the rows it multiplies, from a 16-byte aligned address:
// cuBLASLt reads a scale, and a vector of them, only from one.
//   tensor-wise  The caller's scale; for ag_gemm's gathered rows, the scale of the rank that sent
//                them. It travels like the rows: pushed from that rank's scale into its slot of
//                the peer's symmetric table just before the first rows pushed there, on the same
//                stream, so every matmul that waits for those rows (their arrival flag follows
//                them) also sees it. One 16-byte slot per rank.
//   row-wise     The caller's a_scale + the block's first row where that is aligned; else a copy
//                of the block's scales at an aligned place of a local buffer, made on the caller's
//                stream at the start of the call (only shapes whose blocks start off a multiple of
//                four rows need one). ag_gemm's gathered rows: every chunk's scales are pushed with
//                it (before its rows, on the same stream) into its own aligned slot of the peer's
//                table; the slots follow from the schedule's chunks, the same on every rank.
// Barrier 0 of the next call keeps a slot until its rank has multiplied with it, as it does the rows.
class PipelinedScales {
 public:
  PipelinedScales() = default;
  // Local: where each matmul's scales will be (`schedule` is this rank's of `p`).
  PipelinedScales(const GemmProblem& p, int world, int rank, const plan::Schedule& schedule);
  // Collective where ag_gemm's FP8 A is gathered (the table is symmetric memory), else nothing.
  void make_table(const std::shared_ptr<TeamState>& team);

  // The start of a call: the caller's scales, and the local copies of the blocks that need one.
  void begin_call(const float* a_scale, cudaStream_t stream);
  // Before `copy` (a step of the schedule): the scales that go with its rows, if any.
  void push(const plan::Step& copy, cudaStream_t stream);
  // The scales of the rows of A that a matmul multiplies.
  const float* of(const plan::Region& a) const;

 private:
  bool gathers() const { return table_ ? true : false; }

  int rank_ = 0, world_ = 1;
  bool gather_ = false;          // ag_gemm along M with FP8 A on two or more ranks
  int64_t table_floats_ = 0;
  int64_t rows_per_rank_ = 0;  // ag_gemm: M / W
  bool row_wise_ = false;
  const float* a_scale_ = nullptr;  // the call's
  comm::SymmetricBuffer table_;  // gathered rows' scales: tensor-wise a slot per rank; row-wise per chunk
  std::map<int64_t, int64_t> gathered_slot_;  // row-wise: a gathered chunk's first row -> its slot (floats)
  DeviceBuffer staged_;                        // row-wise: the local copies
  std::map<int64_t, int64_t> staged_slot_;     // a block of the caller's rows: first row -> its place in staged_
  std::vector<std::pair<int64_t, int64_t>> staged_blocks_;  // (first row, rows), copied at each call's start
  std::vector<bool> pushed_;  // tensor-wise: this call's pushes so far, by rank
};

}  // namespace tpgemm::detail
