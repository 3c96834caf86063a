// The ladder's third rung (NOTE [ladder protocol]): the study's threadloadGatherThenCutlass. Two
// kernels on the caller's stream: the threadload gather (ladder_gather_chunk, every chunk with a
// peer's rows, by a grid of SMs), then tpgemm's Hopper GEMM core on the whole gathered A. No
// overlap at all: the gather's cost adds to the GEMM's, which is what fused removes.
#include <algorithm>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/sm90_gemm.h"
#include "ops/ag_gemm/ladder.cuh"

namespace tpgemm::detail {
namespace {

constexpr int kThreads = 512;

__global__ void __launch_bounds__(kThreads) gather_kernel(LadderArgs a) {
  const int64_t chunks = ladder_chunks(a.m);
  for (int64_t u = blockIdx.x; u < a.l * chunks; u += gridDim.x)
    if (!ladder_gather_chunk(a, u / chunks, u % chunks)) return;
}

class GatherThenGemm final : public LadderRung {
 public:
  explicit GatherThenGemm(const ImplContext& ctx) : LadderRung(ctx, true) {
    team_->agree_local("planning gather_then_gemm's GEMM", [&] {
      gemm::MatmulShape s = gemm::packed_shape(p_.m, p_.n, p_.k, p_.l, p_.dtype, p_.b_layout);
      s.has_c = p_.has_c;
      gemm_ = gemm::Sm90Gemm(s, {}, ctx.measure_core);
      if (gemm_.workspace_bytes() > 0) workspace_ = DeviceBuffer(gemm_.workspace_bytes());
    });
  }

  void run(const Operands& o, cudaStream_t stream) override {
    const LadderArgs a = publish_shard(o, stream);
    if (team_->world > 1) {
      const int64_t units = a.l * ladder_chunks(a.m);
      const int blocks = static_cast<int>(std::min<int64_t>(units, int64_t(team_->num_sms) * 2));
      gather_kernel<<<blocks, kThreads, 0, stream>>>(a);
      TPGEMM_CHECK_LAUNCH();
    }
    gemm_.run(a.g, o.b, a.c, o.d, p_.alpha, p_.beta, workspace_.get(), stream);
  }

 private:
  gemm::Sm90Gemm gemm_;
  DeviceBuffer workspace_;
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_gather_then_gemm(const ImplContext& ctx) {
  return std::make_unique<GatherThenGemm>(ctx);
}

}  // namespace tpgemm::detail
