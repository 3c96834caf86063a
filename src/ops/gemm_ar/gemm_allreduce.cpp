// GEMM + AllReduce over tpgemm's own all-reduce kernels (gemm_oneshot / gemm_twoshot). The
// matmul writes its partial product into a private buffer; the one-shot or two-shot kernel
// (which stores it into the peers' symmetric memory as it starts) sums it into D and adds this
// rank's beta * C.
//
// With chunks > 1 (L == 1), D's rows are cut into chunks: the matmuls of all chunks run one
// after another on the caller's stream while a side stream all-reduces each chunk as soon as
// its matmul is done, on a grid capped to `comm_sms` SMs' worth of blocks so that the next
// matmul keeps the rest. Only the first matmul and the last all-reduce are exposed.
#include <algorithm>
#include <vector>

#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/allreduce/symm_allreduce.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

int64_t rows_per_chunk(const GemmProblem& p, int chunks) {
  if (p.l != 1 || chunks <= 1) return p.m;
  return (p.m + chunks - 1) / chunks;
}

class GemmAllReduce final : public OpImpl {
 public:
  explicit GemmAllReduce(const ImplContext& ctx)
      : team_(ctx.team),
        p_(ctx.problem),
        rows_(rows_per_chunk(p_, ctx.choice.chunks)),
        chunks_(static_cast<int>((p_.m + rows_ - 1) / rows_)),
        comm_sms_(std::max(1, ctx.choice.comm_sms)),
        allreduce_(team_, (chunks_ > 1 ? rows_ : p_.l * p_.m) * p_.n, p_.dtype, ctx.choice.impl == Impl::kGemmTwoShot,
                   chunks_ > 1 ? 2 * comm_sms_ : 0) {
    // Local work after the symmetric allocation, so agreed on separately (NOTE [collective construction]).
    team_->agree_local("allocating the matmul's workspace", [&] {
      workspace_ = DeviceBuffer(gemm::LtMatmul::kWorkspaceBytes);
      partial_ = DeviceBuffer(static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(p_.dtype));
      const int64_t last_rows = p_.m - (chunks_ - 1) * rows_;
      matmul_ = gemm::LtMatmul(team_->lt, shape(chunks_ > 1 ? rows_ : p_.m));
      if (last_rows != rows_) last_matmul_ = gemm::LtMatmul(team_->lt, shape(last_rows));
      if (chunks_ > 1) {
        side_ = Stream::create();
        for (int i = 0; i <= chunks_; ++i) events_.push_back(Event::create());
      }
    });
  }

  // The matmuls write only this plan's own buffer (nothing the caller owns before the call is
  // agreed on), which the previous call's all-reduces have finished reading: run() ended by
  // joining them into the caller's stream.
  void prologue(const Operands& o, cudaStream_t stream) override {
    const size_t es = dtype_size(p_.dtype);
    for (int i = 0; i < chunks_; ++i) {
      const int64_t row0 = i * rows_;
      const gemm::LtMatmul& mm = i == chunks_ - 1 && last_matmul_.shape().m > 0 ? last_matmul_ : matmul_;
      mm.run(static_cast<const char*>(o.a) + row0 * p_.k * es, o.b, nullptr,
             static_cast<char*>(partial_.get()) + row0 * p_.n * es, p_.alpha, 0.0f, workspace_.get(), stream);
      if (chunks_ > 1) TPGEMM_CUDA_CHECK(cudaEventRecord(events_[i].get(), stream));
    }
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const bool with_c = p_.has_c && p_.beta != 0.0f;
    if (chunks_ == 1) {
      allreduce_.run(partial_.get(), o.d, with_c ? o.c : nullptr, p_.beta, stream);
      return;
    }
    const size_t es = dtype_size(p_.dtype);
    for (int i = 0; i < chunks_; ++i) {
      const int64_t off = i * rows_ * p_.n * static_cast<int64_t>(es);
      const int64_t rows = std::min(rows_, p_.m - i * rows_);
      TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(side_.get(), events_[i].get(), 0));
      allreduce_.run(static_cast<const char*>(partial_.get()) + off, static_cast<char*>(o.d) + off,
                     with_c ? static_cast<const char*>(o.c) + off : nullptr, p_.beta, side_.get(), rows * p_.n);
    }
    TPGEMM_CUDA_CHECK(cudaEventRecord(events_[chunks_].get(), side_.get()));
    TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(stream, events_[chunks_].get(), 0));
  }

 private:
  gemm::MatmulShape shape(int64_t rows) const {
    gemm::MatmulShape s = gemm::packed_shape(rows, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
    if (chunks_ > 1) s.sm_count = std::max(1, team_->num_sms - comm_sms_);  // room for the all-reduce beside it
    return s;
  }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  int64_t rows_;
  int chunks_;
  int comm_sms_;  // chunked: SMs left to the all-reduce (2 blocks each); the matmuls get the rest
  ops::SymmAllReduce allreduce_;
  DeviceBuffer workspace_, partial_;
  gemm::LtMatmul matmul_, last_matmul_;
  Stream side_;
  std::vector<Event> events_;  // one per chunk's matmul, then the side stream's join
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_ar_symmetric(const ImplContext& ctx) { return std::make_unique<GemmAllReduce>(ctx); }

}  // namespace tpgemm::detail
