// AllGather + GEMM in one persistent Hopper kernel (tpgemm's GEMM core, gemm/sm90): the copy
// engines pull each peer's rows of A into a local gathered buffer while the kernel multiplies,
// and the kernel's load warp waits, piece of K by piece, for the rows it is about to read (NOTE
// [chunk wait] in gemm/sm90/kernels.h). Unlike pipelined_ce there is one kernel, not one matmul
// per chunk: no per-chunk launch, no partial last wave per chunk, and a tile starts on its rows
// as soon as their first piece lands.
//
// One call, rank r (copy = a high-priority side stream; the kernel runs on the caller's stream):
//   copy: barrier 0 (every peer has finished pulling my rows of the previous call; bumps the
//         epoch), then my shard A -> G[my rows]
//   caller's stream: waits for that copy, then the kernel (leaving comm_sms SMs free so that the
//         barrier below can run beside it). With TPGEMM_FUSED_AG_OWN_IN_PLACE=1 and whole tile
//         rows per rank, it waits for barrier 0 alone (which sets the call's sequence numbers)
//         and the kernel reads this rank's rows from A itself (NOTE [own rows in place]; not yet
//         measured, so not yet the default)
//   copy: barrier 1 (every rank's rows are in G), then for each stage s = 1 .. W-1 and each
//         piece j (a range of K columns): G[rows of rank (r+s) mod W, piece j's columns] from that
//         rank's G -> my G, then stage s's flag := piece j's sequence number (a copy-engine
//         write, after the copy in stream order). Stage by stage, piece by piece; or, when the
//         GEMM is a single wave of tiles (all of them start at once), piece by piece across the
//         stages, so that every tile has its first columns early and multiplies while the rest
//         arrive.
//   caller's stream: joins the copy stream.
// G is symmetric: each rank's rows in it are what its peers pull. The stages are pulled one
// after the other, in the order the kernel needs them: pulling them all at once, each on its
// own stream, measured slower: the streams' copies contend for the same NVLink ports, and the
// block the kernel needs first arrives later.
#include "comm/signal_pad.h"
#include "comm/symmetric.h"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "gemm/lt_matmul.h"
#include "gemm/sm90_config.h"
#include "gemm/sm90_gemm.h"
#include "ops/common/copy_batched.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class AgGemmFused final : public OpImpl {
 public:
  explicit AgGemmFused(const ImplContext& ctx)
      : team_(ctx.team), p_(ctx.problem), es_(static_cast<int64_t>(dtype_size(p_.dtype))) {
    TeamState& t = *team_;
    const int W = t.world;
    mw_ = p_.m / W;
    pieces_ = static_cast<int>(std::min<int64_t>(ctx.choice.chunks, gemm::sm90::chunk_wait_k_tiles(p_.k)));
    // NOTE [collective construction]: local checks and buffers first, agreed on; then the
    // collective (symmetric) allocations, which fail on every rank alike.
    t.agree_local("building the fused ag_gemm kernel's plan", [&] {
      throw_if_error(gemm::Sm90Gemm::device_supported(t.device));
      shape_ = gemm::packed_shape(p_.m, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
      shape_.has_c = p_.has_c;
      throw_if_error(gemm::sm90::check_shape(shape_));
      if (W > 1) {
        shape_.sm_count = t.num_sms - std::max(ctx.choice.comm_sms, 1);  // barrier 1 runs beside the kernel
        if (shape_.sm_count < 2)
          throw Error(ErrorCode::kInvalidArgument,
                      strfmt("comm_sms=%d leaves %d of %d SMs: impl fused needs at least 2 (one cluster of its kernel)",
                             ctx.choice.comm_sms, shape_.sm_count, t.num_sms));
        piece_major_ = gemm::sm90::fused_tiles_one_wave(p_.m, p_.n, p_.l, shape_.sm_count);
        own_in_place_ = env_int("TPGEMM_FUSED_AG_OWN_IN_PLACE", 0, 1).value_or(0) == 1 &&
                        mw_ % gemm::sm90::kChunkWaitTileM == 0;
        copy_stream_ = Stream::highest_priority();
        for (Event* e : {&start_, &kernel_may_start_, &end_}) *e = Event::create();
      }
    });
    if (W > 1) {
      gathered_ = comm::SymmetricBuffer(team_, static_cast<size_t>(p_.l * p_.m * p_.k * es_), "fused ag_gemm gathered A");
      pad_ = comm::SignalPad(team_, 2, W - 1, pieces_, "fused ag_gemm flags");
      drop_signals_ = comm::test_drops_signals(t.rank);
    }
    t.agree_local("planning the GEMM", [&] {
      // W = 1: nothing to gather, the GEMM core alone (its rule may pick stream-K: a workspace).
      gemm_ = W == 1 ? gemm::Sm90Gemm(shape_, {}, ctx.measure_core) : gemm::Sm90Gemm(shape_, chunk_wait());
      if (gemm_.workspace_bytes() > 0) workspace_ = DeviceBuffer(gemm_.workspace_bytes());
    });
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const TeamState& t = *team_;
    const void* c = p_.has_c ? o.c : nullptr;
    if (t.world == 1) {
      gemm_.run(o.a, o.b, c, o.d, p_.alpha, p_.beta, workspace_.get(), stream);
      if (o.a_gathered != nullptr)
        TPGEMM_CUDA_CHECK(cudaMemcpyAsync(o.a_gathered, o.a, static_cast<size_t>(p_.l * p_.m * p_.k * es_),
                                          cudaMemcpyDeviceToDevice, stream));
      return;
    }
    const cudaStream_t cs = copy_stream_.get();
    char* g = static_cast<char*>(gathered_.local());
    TPGEMM_CUDA_CHECK(cudaEventRecord(start_.get(), stream));
    TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(cs, start_.get(), 0));
    if (!drop_signals_) pad_.barrier(0, cs);
    if (own_in_place_) TPGEMM_CUDA_CHECK(cudaEventRecord(kernel_may_start_.get(), cs));
    ops::copy_rows(g, p_.m, t.rank * mw_, o.a, mw_, 0, mw_, p_.k * es_, p_.l, cs);
    if (!own_in_place_) TPGEMM_CUDA_CHECK(cudaEventRecord(kernel_may_start_.get(), cs));
    TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(stream, kernel_may_start_.get(), 0));
    gemm_.run(g, o.b, c, o.d, p_.alpha, p_.beta, workspace_.get(), stream, own_in_place_ ? o.a : nullptr);
    if (!drop_signals_) pad_.barrier(1, cs);
    const int stages = t.world - 1;
    for (int i = 0; i < stages * pieces_; ++i) {
      const int s = 1 + (piece_major_ ? i % stages : i / pieces_), j = piece_major_ ? i / stages : i % pieces_;
      pull_piece((t.rank + s) % t.world, j, cs);
      if (!drop_signals_) pad_.signal(s - 1, t.rank, j, cs);
    }
    // The gathered A out (PlanOptions::return_gathered_a): G is whole once the copies are done,
    // on the copy stream, beside the kernel's last tiles.
    if (o.a_gathered != nullptr)
      TPGEMM_CUDA_CHECK(cudaMemcpyAsync(o.a_gathered, g, static_cast<size_t>(p_.l * p_.m * p_.k * es_),
                                        cudaMemcpyDeviceToDevice, cs));
    TPGEMM_CUDA_CHECK(cudaEventRecord(end_.get(), cs));
    TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(stream, end_.get(), 0));
  }

 private:
  // The kernel's arrival schedule (NOTE [chunk wait]): family s - 1 of the pad is stage s, and
  // this rank raises its own slot of each (NOTE [signal pad layout]: families are W slots apart).
  gemm::sm90::ChunkWait chunk_wait() const {
    const TeamState& t = *team_;
    gemm::sm90::ChunkWait w;
    w.flag = pad_.family_slots(0) + t.rank;
    w.flag_stride = t.world;
    w.seq = pad_.seq();
    w.rank = t.rank;
    w.world = t.world;
    w.pieces = pieces_;
    w.rows_per_rank = mw_;
    w.own_in_place = own_in_place_;
    w.env = t.wait_env();
    return w;
  }

  // Piece j of rank src's rows of G, from its G into mine: with one piece, all K columns, one
  // copy for all batch entries; with several, a range of the columns, one 2D copy (the block's
  // rows) per batch entry.
  void pull_piece(int src, int j, cudaStream_t st) const {
    if (pieces_ == 1) {
      ops::copy_rows(gathered_.local(), p_.m, src * mw_, gathered_.peer(src), p_.m, src * mw_, mw_, p_.k * es_, p_.l, st);
      return;
    }
    const int64_t k_tiles = gemm::sm90::chunk_wait_k_tiles(p_.k), tk = gemm::sm90::kChunkWaitTileK;
    const int64_t k0 = gemm::sm90::gather_k_piece_begin(j, k_tiles, pieces_) * tk;
    const int64_t k1 = std::min(gemm::sm90::gather_k_piece_begin(j + 1, k_tiles, pieces_) * tk, p_.k);
    const size_t pitch = static_cast<size_t>(p_.k * es_);
    for (int64_t l = 0; l < p_.l; ++l) {
      const int64_t at = ((l * p_.m + src * mw_) * p_.k + k0) * es_;
      TPGEMM_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(gathered_.local()) + at, pitch,
                                          static_cast<const char*>(gathered_.peer(src)) + at, pitch,
                                          static_cast<size_t>((k1 - k0) * es_), static_cast<size_t>(mw_),
                                          cudaMemcpyDeviceToDevice, st));
    }
  }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  int64_t es_;
  int64_t mw_ = 0;
  int pieces_ = 1;
  bool piece_major_ = false;  // pull piece by piece across the stages (a GEMM of one wave)
  bool own_in_place_ = false;  // the kernel reads this rank's rows from A (NOTE [own rows in place])
  gemm::MatmulShape shape_{};
  comm::SymmetricBuffer gathered_;
  comm::SignalPad pad_;
  Stream copy_stream_;
  Event start_, kernel_may_start_, end_;  // kernel_may_start_: after the own rows' copy, or barrier 0
  gemm::Sm90Gemm gemm_;
  DeviceBuffer workspace_;
  bool drop_signals_ = false;
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_fused(const ImplContext& ctx) { return std::make_unique<AgGemmFused>(ctx); }

}  // namespace tpgemm::detail
