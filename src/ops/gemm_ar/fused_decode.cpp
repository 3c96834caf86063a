// GEMM + AllReduce for decode-sized M, in one kernel (NOTE [fused decode] in fused_decode.h): the
// `fused` implementation of gemm_ar where M is at most 256 rows (plan::fused_ar_decode).
#include <algorithm>

#include "comm/symmetric.h"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "ops/gemm_ar/fused_decode.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {
namespace {

class GemmArFusedDecode final : public OpImpl {
 public:
  explicit GemmArFusedDecode(const ImplContext& ctx)
      : team_(ctx.team), p_(ctx.problem) {
    TeamState& t = *team_;
    const int64_t count = p_.l * p_.m * p_.n;
    const int tile_m = ops::decode_tile_m(p_.m);
    // NOTE [collective construction]: local work first, agreed on, then the symmetric buffer.
    t.agree_local("loading the fused decode kernel", [&] {
      kernel_ = ops::fused_decode_fn(p_.dtype, t.world, tile_m);
      smem_ = ops::fused_decode_smem_bytes(tile_m);
      TPGEMM_CUDA_CHECK(cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_));
      // All of L1 as shared memory: the occupancy below assumes it, and the driver's own choice of
      // carve-out may fit fewer blocks per SM.
      TPGEMM_CUDA_CHECK(
          cudaFuncSetAttribute(kernel_, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
      // Every block must be resident at once (a block that waits holds its SM): at most what fits.
      int per_sm = 0;
      TPGEMM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_, ops::kFusedDecodeThreads, smem_));
      const int64_t tiles = p_.l * (p_.m / tile_m) * (p_.n / ops::kDecodeTileN);
      blocks_ = static_cast<int>(std::min<int64_t>(tiles, std::max(1, per_sm) * static_cast<int64_t>(t.num_sms)));
      calls_ = DeviceBuffer(static_cast<size_t>(blocks_) * sizeof(uint64_t));
      t.zero_now(calls_.get(), calls_.bytes());
      // One-shot unless asked (for calibration and tests): two-shot is not yet measured where it
      // should win, at W > 2 (NOTE [fused decode]).
      two_shot_ = env_int("TPGEMM_DECODE_TWO_SHOT", 0, 1).value_or(0) == 1;
    });
    // Ranks that exchanged differently would wait for pushes that never come: every rank must
    // have the same TPGEMM_DECODE_TWO_SHOT, or every rank throws InvalidArgument naming both.
    t.agree(Status::Ok(), two_shot_ ? "TPGEMM_DECODE_TWO_SHOT=1" : "TPGEMM_DECODE_TWO_SHOT=0",
            "the fused decode kernel's exchange");
    // Two halves of W partial slots and one slot of sums (NOTE [fused decode]).
    stage_ = comm::SymmetricBuffer(team_, static_cast<size_t>(2 * (t.world + 1) * count) * dtype_size(p_.dtype),
                                   "fused decode staging");  // empty: zeros
    drop_sends_ = comm::test_drops_signals(t.rank);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    ops::FusedDecodeArgs a;
    a.a = o.a;
    a.b = o.b;
    a.alpha = p_.alpha;
    a.m = p_.m;
    a.n = p_.n;
    a.k = p_.k;
    a.l = p_.l;
    TPGEMM_ASSERT(team_->world <= plan::kMaxSymmetricWorld);  // impl_supported's limit
    for (int q = 0; q < team_->world; ++q) a.ar.stage[q] = stage_.peer(q);
    a.ar.calls = calls_.as<uint64_t>();
    a.ar.count = p_.l * p_.m * p_.n;
    a.ar.out = o.d;
    a.ar.c = p_.has_c && p_.beta != 0.0f ? o.c : nullptr;
    a.ar.beta = p_.beta;
    a.ar.world = team_->world;
    a.ar.drop_sends = drop_sends_;
    a.ar.env = team_->wait_env();
    a.two_shot = two_shot_;
    void* params[] = {&a};
    TPGEMM_CUDA_CHECK(cudaLaunchKernel(kernel_, dim3(blocks_), dim3(ops::kFusedDecodeThreads), params, smem_, stream));
  }

 private:
  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  const void* kernel_ = nullptr;
  int smem_ = 0;
  int blocks_ = 1;
  DeviceBuffer calls_;
  comm::SymmetricBuffer stage_;
  bool drop_sends_ = false;
  bool two_shot_ = false;
};

}  // namespace

std::unique_ptr<OpImpl> make_gemm_ar_fused_decode(const ImplContext& ctx) {
  return std::make_unique<GemmArFusedDecode>(ctx);
}

}  // namespace tpgemm::detail
