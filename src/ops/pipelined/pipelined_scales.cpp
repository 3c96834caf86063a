#include "ops/pipelined/pipelined_scales.h"

#include <algorithm>
#include <string>

#include "core/assert.h"
#include "core/check.h"
#include "core/format.h"
#include "ops/common/copy_batched.h"
#include "ops/pipelined/scale_pieces.h"
#include "plan/problem.h"
#include "tpgemm/plan.h"

namespace tpgemm::detail {
namespace {

using plan::Buf;
using plan::StepKind;

constexpr int64_t kAligned = 4;  // floats in 16 bytes
int64_t round_up(int64_t x) { return (x + kAligned - 1) / kAligned * kAligned; }

// Places one after the other, `k_blocks` rows of each block's rows, each at a 16-byte aligned
// offset (in floats): first row -> offset. Returns the floats they take.
int64_t place(const std::map<int64_t, int64_t>& rows_at, int64_t k_blocks, std::map<int64_t, int64_t>& at) {
  int64_t next = 0;
  for (const auto& [row0, rows] : rows_at) {
    at[row0] = next;
    next += k_blocks * round_up(rows);
  }
  return next;
}

}  // namespace

PipelinedScales::PipelinedScales(const GemmProblem& p, int world, int rank, const plan::Schedule& schedule)
    : rank_(rank), world_(world) {
  if (!is_fp8(p.dtype)) return;
  gather_ = p.op == Op::kAgGemm && p.shard_dim == ShardDim::kM && world > 1;
  rows_per_rank_ = p.m / world;
  pushed_.assign(static_cast<size_t>(world), false);
  table_floats_ = world * kAligned;  // tensor-wise: a slot per rank
  vectors_ = p.scale_mode != ScaleMode::kTensor;
  if (!vectors_) return;
  block_ = p.scale_mode == ScaleMode::kBlock;
  k_blocks_ = block_ ? scale_k_blocks(p) : 1;
  a_rows_ = plan::a_rows(p, world);
  // The blocks of the caller's rows that need a copy, and every gathered chunk (the matmuls read
  // the peers' chunks, the copies send this rank's own: all of them, the same on every rank).
  std::map<int64_t, int64_t> staged_rows, gathered_rows;
  for (const plan::Step& s : schedule.steps) {
    if (s.kind == StepKind::kGemm && block_ && (s.src.row0 % 4 != 0 || s.src.rows % 4 != 0))
      throw Error(ErrorCode::kUnsupported,
                  strfmt("impl pipelined_ce with scale_mode=block multiplies rows [%lld, %lld) in one matmul: "
                         "cuBLASLt's block-scaled matmul takes multiples of 4 rows; expected fewer chunks "
                         "(PlanOptions::chunks_per_rank), or impl=auto",
                         (long long)s.src.row0, (long long)(s.src.row0 + s.src.rows)));
    if (s.kind == StepKind::kGemm && s.src.buf == Buf::kUserA && !in_place(s.src)) {
      // (a copy is laid out for its block's rows: two blocks from one row must be one block)
      const auto [it, fresh] = staged_rows.emplace(s.src.row0, s.src.rows);
      TPGEMM_ASSERT(fresh || it->second == s.src.rows);
    }
    if (s.kind == StepKind::kGemm && s.src.buf == Buf::kGathered) gathered_rows[s.src.row0] = s.src.rows;
    if (s.kind == StepKind::kCopy && s.dst.buf == Buf::kGathered) gathered_rows[s.dst.row0] = s.dst.rows;
  }
  const int64_t staged = place(staged_rows, k_blocks_, staged_at_);
  if (staged > 0) {
    staged_ = DeviceBuffer(static_cast<size_t>(staged) * sizeof(float));
    std::vector<ops::ScalePiece> pieces;
    for (const auto& [row0, rows] : staged_rows) pieces.push_back({row0, rows, staged_at_.at(row0)});
    piece_count_ = static_cast<int>(pieces.size());
    pieces_ = DeviceBuffer(pieces.size() * sizeof(ops::ScalePiece));
    TPGEMM_CUDA_CHECK(cudaMemcpy(pieces_.get(), pieces.data(), pieces_.bytes(), cudaMemcpyHostToDevice));
  }
  table_floats_ = std::max<int64_t>(place(gathered_rows, k_blocks_, gathered_at_), kAligned);
}

bool PipelinedScales::in_place(const plan::Region& a) const {
  return block_ ? a.row0 == 0 && a.rows == a_rows_ : a.row0 % kAligned == 0;
}

void PipelinedScales::make_table(const std::shared_ptr<TeamState>& team) {
  if (gather_)
    table_ = comm::SymmetricBuffer(team, static_cast<size_t>(table_floats_) * sizeof(float),
                                   vectors_ ? "pipelined FP8 scales per chunk" : "pipelined FP8 scales");
}

void PipelinedScales::begin_call(const float* a_scale, cudaStream_t stream) {
  a_scale_ = a_scale;
  pushed_.assign(pushed_.size(), false);
  ops::launch_copy_scale_pieces(staged_.as<float>(), a_scale, a_rows_, k_blocks_, pieces_.as<ops::ScalePiece>(),
                                piece_count_, stream);
}

void PipelinedScales::push(const plan::Step& copy, cudaStream_t stream) {
  if (!gather_ || copy.dst.buf != Buf::kGathered) return;
  const auto dest = static_cast<size_t>(copy.dst.rank);
  if (vectors_) {
    if (copy.src.rows == 0) return;
    float* slot = static_cast<float*>(table_.peer(copy.dst.rank)) + gathered_at_.at(copy.dst.row0);
    const size_t width = static_cast<size_t>(copy.src.rows) * sizeof(float);  // a row of the chunk's per K block
    ops::copy_batched(slot, width, a_scale_ + copy.src.row0, static_cast<size_t>(a_rows_) * sizeof(float), width,
                      k_blocks_, stream);
    return;
  }
  if (pushed_[dest]) return;
  pushed_[dest] = true;
  float* slot = static_cast<float*>(table_.peer(copy.dst.rank)) + rank_ * kAligned;
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(slot, a_scale_, sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

const float* PipelinedScales::of(const plan::Region& a) const {
  const float* table = static_cast<const float*>(table_.local());
  if (!vectors_) return gather_ && a.buf == Buf::kGathered ? table + a.row0 / rows_per_rank_ * kAligned : a_scale_;
  if (a.buf == Buf::kGathered) return table + gathered_at_.at(a.row0);
  TPGEMM_ASSERT(a.buf == Buf::kUserA);  // (row-wise and block scales run along M: the schedule's A is the caller's)
  return in_place(a) ? a_scale_ + a.row0 : staged_.as<float>() + staged_at_.at(a.row0);
}

}  // namespace tpgemm::detail
