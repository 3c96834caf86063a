// The ladder's first rung (NOTE [ladder protocol]): one thread per element of D, reading its row
// of A straight from the owner's G over NVLink, every time: no staging, no reuse between threads
// beyond what the caches keep. The study's naiveRemoteRead.
#include "core/check.h"
#include "ops/ag_gemm/ladder.cuh"
#include "ops/common/vec.cuh"

namespace tpgemm::detail {
namespace {

template <typename T>
__global__ void naive_remote_kernel(LadderArgs a) {
  const int64_t total = a.l * a.m * a.n;
  int owner_seen = -1;  // the owner whose flag this thread has already seen
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % a.n, row = (i / a.n) % a.m, l = i / (a.n * a.m);
    const int owner = ladder_owner(a, row);
    if (owner != owner_seen) {
      if (!ladder_owner_ready(a, owner)) return;
      owner_seen = owner;
    }
    const T* arow = static_cast<const T*>(a.g_peers[owner]) + (l * a.m + row) * a.k;
    const T* b = static_cast<const T*>(a.b) + l * a.n * a.k;
    float acc = 0.0f;
    for (int64_t k = 0; k < a.k; k += 8) {
      float x[8], y[8];
      ops::load8(arow + k, x);
      if (a.b_kn) {
#pragma unroll
        for (int j = 0; j < 8; ++j) y[j] = static_cast<float>(b[(k + j) * a.n + col]);
      } else {
        ops::load8(b + col * a.k + k, y);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) acc += x[j] * y[j];
    }
    float v = a.alpha * acc;
    if (a.c != nullptr) v += a.beta * static_cast<float>(static_cast<const T*>(a.c)[i]);
    static_cast<T*>(a.d)[i] = static_cast<T>(v);
  }
}

void launch_naive_remote(const LadderArgs& a, DType dtype, int num_sms, cudaStream_t stream) {
  const int threads = 256;
  const int64_t total = a.l * a.m * a.n;
  const int blocks = static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, int64_t(num_sms) * 16));
  if (dtype == DType::kBF16) naive_remote_kernel<__nv_bfloat16><<<blocks, threads, 0, stream>>>(a);
  else naive_remote_kernel<__half><<<blocks, threads, 0, stream>>>(a);
  TPGEMM_CHECK_LAUNCH();
}

class NaiveRemote final : public LadderRung {
 public:
  explicit NaiveRemote(const ImplContext& ctx) : LadderRung(ctx, false) {}
  void run(const Operands& o, cudaStream_t stream) override {
    launch_naive_remote(publish_shard(o, stream), p_.dtype, team_->num_sms, stream);
  }
};

}  // namespace

std::unique_ptr<OpImpl> make_ag_gemm_naive_remote(const ImplContext& ctx) { return std::make_unique<NaiveRemote>(ctx); }

}  // namespace tpgemm::detail
