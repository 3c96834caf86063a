// GEMM + ReduceScatter, and GEMM + AllReduce, with the communication beside the GEMM, tile by
// tile: tpgemm's Hopper GEMM core writes this rank's whole partial product into a local buffer
// and raises a local flag per tile as it lands (NOTE [tile signal] in gemm/sm90/kernels.h); a
// kernel beside it pushes each finished tile to its owner over NVLink, and each owner sums its
// rows' W tiles as they arrive (NOTE [tile reduce] in tile_reduce.h). For gemm_ar the owner also
// pushes each sum to every peer, which copies it into its D (NOTE [tile all-reduce]). The GEMM is
// one kernel at full size (no chunk matmuls with partial last waves, as pipelined_ce's), and its
// tile rows are dealt to the owners in turn (NOTE [tile order]), so every owner's rows finish at
// the same pace and travel while the GEMM goes on; only the last wave's tiles move after it.
//
// One call, rank r:
//   caller's stream: control[0] += 1 (the call's sequence number) and control[1] = 0 (its
//                    tickets), then the GEMM on all SMs but
//                    comm_sms, then the push-and-reduce kernel on every SM (the last wave's tiles);
//   side stream:     the push-and-reduce kernel on comm_sms blocks, beside the GEMM (none if 0);
//   caller's stream: joins the side stream.
// gemm_rs: correct, but it measured slower than pipelined_ce, whose copy engines move the partials
// without taking SMs from the GEMM: the planner's rules never pick it, and its tuning only where it
// wins (docs/planner.md).
#include "comm/symmetric.h"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "gemm/sm90_config.h"
#include "gemm/sm90_gemm.h"
#include "ops/gemm_rs/tile_reduce.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class FusedTileReduce final : public OpImpl {
 public:
  explicit FusedTileReduce(const ImplContext& ctx) : team_(ctx.team), p_(ctx.problem) {
    TeamState& t = *team_;
    const int W = t.world;
    // NOTE [collective construction]: local checks and buffers first, agreed on; then the
    // symmetric allocations, which fail on every rank alike.
    const char* what =
        all_reduce() ? "building the fused gemm_ar kernel's plan" : "building the fused gemm_rs kernel's plan";
    t.agree_local(what, [&] {
      throw_if_error(gemm::Sm90Gemm::device_supported(t.device));
      shape_ = gemm::packed_shape(p_.m, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
      shape_.has_c = W == 1 && p_.has_c;  // W > 1: C is added by the reduction
      throw_if_error(gemm::sm90::check_shape(shape_));
      if (W == 1) return;
      comm_sms_ = ctx.choice.comm_sms;  // 0: the reduction only after the GEMM
      shape_.sm_count = t.num_sms - comm_sms_;
      if (shape_.sm_count < 2)
        throw Error(ErrorCode::kInvalidArgument,
                    strfmt("comm_sms=%d leaves %d of %d SMs: impl fused needs at least 2 (one cluster of its kernel)",
                           ctx.choice.comm_sms, shape_.sm_count, t.num_sms));
      side_ = Stream::highest_priority();
      for (Event* e : {&start_, &side_done_}) *e = Event::create();
      reduce_.m = p_.m, reduce_.n = p_.n, reduce_.l = p_.l;
      reduce_.m_tiles = (p_.m + ops::kTileReduceM - 1) / ops::kTileReduceM;
      reduce_.slot_rows = ops::tile_reduce_slot_rows(all_reduce(), p_.m, W);
      reduce_.n_tiles = (p_.n + ops::kTileReduceN - 1) / ops::kTileReduceN;
      // TPGEMM_TILE_GROUP: a tuning hook over the measured choice of tiles per unit.
      reduce_.group_tiles = env_int("TPGEMM_TILE_GROUP", 1, ops::kTileReduceGroup)
                                .value_or(ops::tile_reduce_group(p_.l, reduce_.m_tiles, reduce_.n_tiles));
      partial_ = DeviceBuffer(bytes_of_d());
      tile_flags_ = DeviceBuffer(static_cast<size_t>(p_.l * reduce_.m_tiles * reduce_.n_tiles) * sizeof(uint64_t));
      control_ = DeviceBuffer(2 * sizeof(uint64_t));
      t.zero_now(tile_flags_.get(), tile_flags_.bytes());
      t.zero_now(control_.get(), control_.bytes());
      ops::preload_tile_reduce(p_.dtype, W, all_reduce());
    });
    if (W > 1) {
      // Two halves of W slots of an owner's rows; empty (zeros) as NOTE [empty lanes] needs.
      const size_t slot_bytes = static_cast<size_t>(p_.l * reduce_.slot_rows * p_.n) * dtype_size(p_.dtype);
      recv_ = comm::SymmetricBuffer(team_, 2 * static_cast<size_t>(W) * slot_bytes, "fused gemm_rs/gemm_ar receive slots");
      // gemm_ar: [L, M, N] for the owners' sums, one half (NOTE [tile all-reduce]).
      if (all_reduce()) gather_ = comm::SymmetricBuffer(team_, bytes_of_d(), "fused gemm_ar gather buffer");
      reduce_.partial = partial_.get();
      reduce_.tile_flags = tile_flags_.as<uint64_t>();
      reduce_.recv = recv_.device_peers();
      reduce_.gather = all_reduce() ? gather_.device_peers() : nullptr;
      reduce_.control = control_.as<uint64_t>();
      reduce_.world = W;
      reduce_.rank = t.rank;
      reduce_.drop_pushes = comm::test_drops_signals(t.rank);  // test hook: peers must time out naming this rank
      reduce_.env = t.wait_env();
    }
    t.agree_local("planning the GEMM", [&] {
      if (W == 1) {
        gemm_ = gemm::Sm90Gemm(shape_, {}, ctx.measure_core);
      } else {
        gemm::sm90::TileRowOrder order;  // gemm_ar: the plain order (NOTE [tile all-reduce])
        if (!all_reduce()) {
          order.ways = W;
          order.way_rows = p_.m / W;
        }
        gemm::sm90::TileSignal signal;
        signal.flags = tile_flags_.as<uint64_t>();
        signal.seq = control_.as<uint64_t>();
        signal.m_tiles = reduce_.m_tiles;
        signal.n_tiles = reduce_.n_tiles;
        gemm_ = gemm::Sm90Gemm(shape_, order, signal);
      }
      if (gemm_.workspace_bytes() > 0) workspace_ = DeviceBuffer(gemm_.workspace_bytes());
    });
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const TeamState& t = *team_;
    if (t.world == 1) {
      gemm_.run(o.a, o.b, p_.has_c ? o.c : nullptr, o.d, p_.alpha, p_.beta, workspace_.get(), stream);
      return;
    }
    ops::launch_begin_call(control_.as<uint64_t>(), stream);
    TPGEMM_CUDA_CHECK(cudaEventRecord(start_.get(), stream));
    TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(side_.get(), start_.get(), 0));
    gemm_.run(o.a, o.b, nullptr, partial_.get(), p_.alpha, 0.0f, workspace_.get(), stream);
    ops::TileReduceArgs a = reduce_;
    a.d = o.d;
    a.c = p_.has_c && p_.beta != 0.0f ? o.c : nullptr;
    a.beta = p_.beta;
    // The join: the next call's begin_call resets the ticket counter, so it must run after every
    // block of this call, the side launch's included, even if the tail launch below fails.
    const auto join = [&] {
      TPGEMM_CUDA_CHECK(cudaEventRecord(side_done_.get(), side_.get()));
      TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(stream, side_done_.get(), 0));
    };
    try {
      // Beside the GEMM: one block per SM it leaves free, at most (NOTE [tile reduce]).
      if (comm_sms_ > 0) ops::launch_tile_reduce(a, p_.dtype, comm_sms_, side_.get());
      ops::launch_tile_reduce(a, p_.dtype, 2 * t.num_sms, stream);
    } catch (...) {
      join();
      throw;
    }
    join();
  }

 private:
  bool all_reduce() const { return p_.op == Op::kGemmAr; }
  // The partial product [L, M, N]; gemm_ar's D too (gemm_rs's is [L, M/W, N]).
  size_t bytes_of_d() const { return static_cast<size_t>(p_.l * p_.m * p_.n) * dtype_size(p_.dtype); }  // [L, M, N]

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  int comm_sms_ = 0;
  gemm::MatmulShape shape_{};
  DeviceBuffer partial_, tile_flags_, control_;
  comm::SymmetricBuffer recv_, gather_;
  ops::TileReduceArgs reduce_{};
  Stream side_;
  Event start_, side_done_;
  gemm::Sm90Gemm gemm_;
  DeviceBuffer workspace_;
};

}  // namespace

std::unique_ptr<OpImpl> make_fused_tile_reduce(const ImplContext& ctx) {
  return std::make_unique<FusedTileReduce>(ctx);
}

}  // namespace tpgemm::detail
