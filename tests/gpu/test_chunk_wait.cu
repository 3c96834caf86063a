// The fused AllGather+GEMM's kernel on one GPU (NOTE [chunk wait]): a persistent GEMM whose
// load warps wait for flags that work on another stream raises while the GEMM runs. That is
// only possible if the GEMM leaves SMs for that work (MatmulShape::sm_count): this test makes
// the GEMM wait on a peer's rows that a kernel on a second stream, launched after the GEMM,
// releases; a GEMM that took every SM would time out instead of computing D. So would a flag
// kernel loaded on its first launch (NOTE [lazy loading]): without load_kernel_now below, the
// first case timed out on an H200 and the later ones, the kernel loaded by then, passed.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "comm/device/sync.cuh"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/sm90_gemm.h"
#include "support/gpu_env.h"
#include "testing/testing.h"

namespace tpgemm {
namespace {

__global__ void raise_flag(uint64_t* flag, uint64_t value) { comm::st_release_sys(flag, value); }

enum class Beside { kFlagOnly, kCopyThenFlag };

// Rank 0 of a make-believe team of two: rows [0, mw) of A are its own, rows [mw, 2 mw) a peer's.
// The second stream either only raises the peer stage's flag (the rows are in place before the
// GEMM starts: what fused's barrier and signals need), or first copies the rows (a device-local
// cudaMemcpyAsync) and then raises it.
Status run_beside(Beside beside, int64_t mw, int64_t n, int64_t k, int free_sms, testing::Diff* diff) {
  const DType dt = DType::kBF16;
  const int64_t m = 2 * mw;
  Stream gemm_stream = Stream::create(), side = Stream::highest_priority();
  const cudaStream_t s1 = gemm_stream.get(), s2 = side.get();
  DeviceBuffer a(m * k * 2), g(m * k * 2), b(n * k * 2), d(m * n * 2), ref(m * n * sizeof(float));
  DeviceBuffer control(2 * sizeof(uint64_t));  // [0] stage 1's flag, [1] seq[0]
  testing::fill_random(a.get(), dt, 1, m, k, 0, m, 31, s1);
  testing::fill_random(b.get(), dt, 1, n, k, 0, n, 32, s1);
  testing::fill_random(g.get(), dt, 1, m, k, 0, m, 33, s1);  // stale rows: wrong if read early
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(g.get(), a.get(), mw * k * 2, cudaMemcpyDeviceToDevice, s1));
  if (beside == Beside::kFlagOnly)
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(g.as<char>() + mw * k * 2, a.as<char>() + mw * k * 2, mw * k * 2,
                                      cudaMemcpyDeviceToDevice, s1));
  const uint64_t init[2] = {0, 1};
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(control.get(), init, sizeof(init), cudaMemcpyHostToDevice, s1));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref.get(), 0, ref.bytes(), s1));
  testing::reference_gemm(a.get(), b.get(), nullptr, ref.as<float>(), m, n, k, 1, dt, BLayout::kNK, 1.0f, 0.0f,
                          testing::RefEngine::kNaive, nullptr, s1);
  testing::poison(d.get(), m * n, dt, s1);
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(s1));

  int sms = 0;
  TPGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  gemm::MatmulShape shape = gemm::packed_shape(m, n, k, 1, dt, BLayout::kNK);
  shape.sm_count = sms - free_sms;
  const comm::TimeoutMailbox mailbox;
  gemm::sm90::ChunkWait w;
  w.flag = control.as<uint64_t>();
  w.flag_stride = 1;
  w.seq = control.as<uint64_t>() + 1;
  w.rank = 0;
  w.world = 2;
  w.pieces = 1;
  w.rows_per_rank = mw;
  w.env = mailbox.env(0, 3000);
  const gemm::Sm90Gemm mm(shape, w);
  const DeviceBuffer ws(mm.workspace_bytes());
  mm.run(g.get(), b.get(), nullptr, d.get(), 1.0f, 0.0f, ws.get(), s1);
  // The GEMM's tiles of the peer's rows cannot finish without the flag: after this pause it is
  // surely resident, so the work below has to run beside it.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (beside == Beside::kCopyThenFlag)
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(g.as<char>() + mw * k * 2, a.as<char>() + mw * k * 2, mw * k * 2,
                                      cudaMemcpyDeviceToDevice, s2));
  raise_flag<<<1, 1, 0, s2>>>(control.as<uint64_t>(), 1);
  TPGEMM_CHECK_LAUNCH();
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(s2));
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(s1));
  *diff = testing::compare(d.get(), dt, ref.as<float>(), 1, m * n, 0, 0, 0, s1);
  return mailbox.status();
}

TEST(ChunkWaitKernel, LeavesSmsForTheKernelsThatRaiseItsFlags) {
  TPGEMM_REQUIRE_GPUS(1);
  TPGEMM_CUDA_CHECK(cudaSetDevice(0));
  load_kernel_now(raise_flag);
  // 1024 x 8192 x 2048: 256 tiles, two waves; 512 x 8192: one wave, every tile waiting at once.
  for (int64_t mw : {512, 256})
    for (Beside beside : {Beside::kFlagOnly, Beside::kCopyThenFlag}) {
      const std::string what = strfmt("M=%lld, %s beside the GEMM", (long long)(2 * mw),
                                      beside == Beside::kFlagOnly ? "a flag kernel" : "a copy and a flag kernel");
      testing::Diff diff;
      const Status s = run_beside(beside, mw, 8192, 2048, 2, &diff);
      EXPECT_TRUE(s.ok()) << what << ": " << s.message;
      EXPECT_TRUE(diff.passes(testing::default_eps(DType::kBF16)))
          << what << ": rel_err " << diff.rel_err << ", " << diff.nonfinite << " non-finite";
    }
}

}  // namespace
}  // namespace tpgemm
