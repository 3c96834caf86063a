#include "ops/pipelined/pipelined_scales.h"

#include <algorithm>

#include "core/assert.h"
#include "core/check.h"

namespace tpgemm::detail {
namespace {

using plan::Buf;
using plan::StepKind;

constexpr int64_t kAligned = 4;  // floats in 16 bytes
int64_t round_up(int64_t x) { return (x + kAligned - 1) / kAligned * kAligned; }

// Places one after the other, each at a 16-byte aligned offset (in floats): first row -> offset.
// Returns the floats they take.
int64_t place(const std::map<int64_t, int64_t>& rows_at, std::map<int64_t, int64_t>& slot) {
  int64_t next = 0;
  for (const auto& [row0, rows] : rows_at) {
    slot[row0] = next;
    next += round_up(rows);
  }
  return next;
}

}  // namespace

PipelinedScales::PipelinedScales(const GemmProblem& p, int world, int rank, const plan::Schedule& schedule)
    : rank_(rank), world_(world), row_wise_(p.scale_mode == ScaleMode::kRow) {
  if (!is_fp8(p.dtype)) return;
  gather_ = p.op == Op::kAgGemm && p.shard_dim == ShardDim::kM && world > 1;
  rows_per_rank_ = p.m / world;
  pushed_.assign(static_cast<size_t>(world), false);
  table_floats_ = world * kAligned;  // tensor-wise: a slot per rank
  if (!row_wise_) return;
  // Blocks of the caller's rows that start off alignment, and every gathered chunk (the matmuls
  // read the peers' chunks, the copies send this rank's own: all of them, the same on every rank).
  std::map<int64_t, int64_t> staged_rows, gathered_rows;
  for (const plan::Step& s : schedule.steps) {
    if (s.kind == StepKind::kGemm && s.src.buf == Buf::kUserA && s.src.row0 % kAligned != 0)
      staged_rows[s.src.row0] = std::max(staged_rows[s.src.row0], s.src.rows);
    if (s.kind == StepKind::kGemm && s.src.buf == Buf::kGathered) gathered_rows[s.src.row0] = s.src.rows;
    if (s.kind == StepKind::kCopy && s.dst.buf == Buf::kGathered) gathered_rows[s.dst.row0] = s.dst.rows;
  }
  for (const auto& block : staged_rows) staged_blocks_.push_back(block);
  const int64_t staged = place(staged_rows, staged_slot_);
  if (staged > 0) staged_ = DeviceBuffer(static_cast<size_t>(staged) * sizeof(float));
  table_floats_ = std::max<int64_t>(place(gathered_rows, gathered_slot_), kAligned);
}

void PipelinedScales::make_table(const std::shared_ptr<TeamState>& team) {
  if (gather_)
    table_ = comm::SymmetricBuffer(team, static_cast<size_t>(table_floats_) * sizeof(float),
                                   row_wise_ ? "pipelined FP8 row scales" : "pipelined FP8 scales");
}

void PipelinedScales::begin_call(const float* a_scale, cudaStream_t stream) {
  a_scale_ = a_scale;
  pushed_.assign(pushed_.size(), false);
  for (const auto& [row0, rows] : staged_blocks_)
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(staged_.as<float>() + staged_slot_.at(row0), a_scale + row0,
                                      static_cast<size_t>(rows) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

void PipelinedScales::push(const plan::Step& copy, cudaStream_t stream) {
  if (!gathers() || copy.dst.buf != Buf::kGathered) return;
  const auto dest = static_cast<size_t>(copy.dst.rank);
  if (row_wise_) {
    float* slot = static_cast<float*>(table_.peer(copy.dst.rank)) + gathered_slot_.at(copy.dst.row0);
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(slot, a_scale_ + copy.src.row0, static_cast<size_t>(copy.src.rows) * sizeof(float),
                                      cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (pushed_[dest]) return;
  pushed_[dest] = true;
  float* slot = static_cast<float*>(table_.peer(copy.dst.rank)) + rank_ * kAligned;
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(slot, a_scale_, sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

const float* PipelinedScales::of(const plan::Region& a) const {
  const float* table = static_cast<const float*>(table_.local());
  if (!row_wise_) return gathers() && a.buf == Buf::kGathered ? table + a.row0 / rows_per_rank_ * kAligned : a_scale_;
  if (a.buf == Buf::kGathered) return table + gathered_slot_.at(a.row0);
  TPGEMM_ASSERT(a.buf == Buf::kUserA);  // (row-wise scales run along M: the schedule's A is the caller's)
  return a.row0 % kAligned == 0 ? a_scale_ + a.row0 : staged_.as<float>() + staged_slot_.at(a.row0);
}

}  // namespace tpgemm::detail
