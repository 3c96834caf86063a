// GEMM + AllReduce for small and mid-sized M: the matmul writes its partial product into a
// private buffer, then tpgemm's one-shot or two-shot all-reduce (which copies it into symmetric
// memory as it starts) sums it into D and adds this rank's beta * C. A far shorter all-reduce
// than NCCL's for messages of a few MB (docs/perf.md).
//
// NOTE [row pieces]
// With chunks > 1 (L = 1 only) the rows are cut into pieces: piece i's all-reduce runs on a
// side stream while piece i + 1 multiplies, the all-reduce's blocks kept to comm_sms SMs and the
// matmul told to leave those SMs free (cuBLASLt's SM count target), so that neither waits for
// the other's blocks to drain. The last piece's all-reduce starts once the side stream is done:
// two all-reduce grids are never resident at once, so neither can hold the SMs that the
// other's blocks, waited on by a peer, need. One piece is the matmul then the all-reduce.
#include <algorithm>
#include <vector>

#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/allreduce/symm_allreduce.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class GemmAllReduce final : public OpImpl {
 public:
  explicit GemmAllReduce(const ImplContext& ctx)
      : team_(ctx.team),
        p_(ctx.problem),
        rows_(piece_rows(p_, ctx.choice.chunks)),
        pieces_(static_cast<int>((p_.m + rows_ - 1) / rows_)),
        last_rows_(p_.m - (pieces_ - 1) * rows_),
        two_shot_(ctx.choice.impl == Impl::kGemmTwoShot),
        // Overlapped: with the matmul beside it on the other SMs (NOTE [row pieces]).
        side_sms_(pieces_ > 1 ? ctx.choice.comm_sms : 0),
        last_(team_, p_.l * last_rows_ * p_.n, p_.dtype, two_shot_) {
    if (pieces_ > 1) overlapped_ = std::make_unique<ops::SymmAllReduce>(team_, rows_ * p_.n, p_.dtype, two_shot_, side_sms_);
    // Local work after the symmetric allocation, so agreed on separately (NOTE [collective construction]).
    team_->agree_local("allocating the matmul's workspace", [&] {
      workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
      partial_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(p_.dtype));
      const int carved = side_sms_ > 0 ? team_->num_sms - side_sms_ : 0;
      for (int i = 0; i < pieces_; ++i) {
        gemm::MatmulShape s = gemm::packed_shape(rows_of(i), p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
        s.sm_count = i > 0 ? carved : 0;  // beside the previous piece's all-reduce
        matmuls_.emplace_back(team_->lt, s);
        if (i + 1 < pieces_) multiplied_.push_back(Event::create());
      }
      if (pieces_ > 1) {
        side_ = Stream::highest_priority();
        side_done_ = Event::create();
      }
    });
  }

  // The matmuls write only this plan's own buffer (nothing the caller owns before the call is
  // agreed on), which the previous call's all-reduces have finished reading (stream order: the
  // previous run() ended by joining the side stream).
  void prologue(const Operands& o, cudaStream_t stream) override {
    const size_t es = dtype_size(p_.dtype);
    for (int i = 0; i < pieces_; ++i) {
      const int64_t row0 = i * rows_;
      matmuls_[i].run(static_cast<const char*>(o.a) + row0 * p_.k * es, o.b, nullptr, partial_.as<char>() + row0 * p_.n * es,
                      p_.alpha, 0.0f, workspace_.get(), stream);
      if (i + 1 < pieces_) TPGEMM_CUDA_CHECK(cudaEventRecord(multiplied_[i].get(), stream));
    }
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const bool c = p_.has_c && p_.beta != 0.0f;
    const size_t es = dtype_size(p_.dtype);
    const auto at = [&](const void* base, int64_t row0) { return static_cast<const char*>(base) + row0 * p_.n * es; };
    for (int i = 0; i + 1 < pieces_; ++i) {
      const int64_t row0 = i * rows_;
      TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(side_.get(), multiplied_[i].get(), 0));
      overlapped_->run(at(partial_.get(), row0), const_cast<char*>(at(o.d, row0)), c ? at(o.c, row0) : nullptr, p_.beta,
                       side_.get());
    }
    if (pieces_ > 1) {
      TPGEMM_CUDA_CHECK(cudaEventRecord(side_done_.get(), side_.get()));
      TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(stream, side_done_.get(), 0));
    }
    const int64_t row0 = (pieces_ - 1) * rows_;
    last_.run(at(partial_.get(), row0), const_cast<char*>(at(o.d, row0)), c ? at(o.c, row0) : nullptr, p_.beta, stream);
  }

 private:
  // Rows per piece: M / chunks rounded up; the whole of M where the batch makes pieces strided.
  static int64_t piece_rows(const GemmProblem& p, int chunks) {
    if (p.l > 1 || chunks <= 1) return p.m;
    return std::max<int64_t>(1, (p.m + chunks - 1) / chunks);
  }
  int64_t rows_of(int i) const { return i + 1 < pieces_ ? rows_ : last_rows_; }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  int64_t rows_;
  int pieces_;
  int64_t last_rows_;
  bool two_shot_;
  int side_sms_;
  ops::SymmAllReduce last_;                         // the last piece's (all of D with one piece)
  std::unique_ptr<ops::SymmAllReduce> overlapped_;  // every other piece's, beside a matmul
  DeviceBuffer workspace_, partial_;
  std::vector<gemm::LtMatmul> matmuls_;
  std::vector<Event> multiplied_;  // piece i's matmul is done
  Stream side_;
  Event side_done_;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_ar_symmetric(const ImplContext& ctx) { return std::make_unique<GemmAllReduce>(ctx); }

}  // namespace tpgemm::detail
