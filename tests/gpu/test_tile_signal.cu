// The fused GEMM+ReduceScatter's kernel on one GPU (NOTE [tile signal]): a persistent GEMM that
// raises a flag per output tile once the tile's stores are done, read by a kernel beside it that
// pushes the tile on. Here the kernel beside it copies each tile into a mirror the moment its
// flag is up; D is poisoned (NaN) before the GEMM, so a flag raised before its tile's data
// landed leaves poison or stale values in the mirror, and the mirror no longer matches the
// reference (an epilogue raising each flag before its tile's stores fails every case below). A
// flag raised after the stores are issued but before they complete is beyond its reach: on one
// GPU they land before the watcher reads. The watcher is launched first and the GEMM leaves it
// SMs, so it runs all along.
#include <gtest/gtest.h>

#include <string>

#include "comm/device/sync.cuh"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/sm90_gemm.h"
#include "ops/gemm_rs/tile_reduce.h"
#include "support/gpu_env.h"
#include "testing/testing.h"

namespace tpgemm {
namespace {

constexpr int64_t kTm = ops::kTileReduceM, kTn = ops::kTileReduceN;

// Block b takes tiles b, b + gridDim.x, ... in index order (the GEMM's order, rastered along N):
// waits for each flag to reach `seq` (bounded by env), then copies the tile of D (cut at M and N)
// into the mirror.
__global__ void copy_tiles_as_flagged(const uint64_t* flags, const uint64_t* seq, const __nv_bfloat16* d,
                                      __nv_bfloat16* mirror, int64_t m, int64_t n, int64_t m_tiles, int64_t n_tiles,
                                      comm::WaitEnv env) {
  __shared__ bool ok;
  for (int64_t t = blockIdx.x; t < m_tiles * n_tiles; t += gridDim.x) {
    if (threadIdx.x == 0) ok = comm::wait_geq(flags + t, *seq, env, 0, comm::WaitSite::kTileFlag, static_cast<int>(t));
    __syncthreads();
    if (!ok) return;
    const int64_t r0 = t / n_tiles * kTm, c0 = t % n_tiles * kTn;
    const int64_t rows = min(kTm, m - r0), cols = min(kTn, n - c0);
    // Last elements first: the epilogue stores a tile's subtiles in turn, the last ones latest.
    for (int64_t i = rows * cols - 1 - threadIdx.x; i >= 0; i -= blockDim.x) {
      const int64_t at = (r0 + i / cols) * n + c0 + i % cols;
      mirror[at] = d[at];
    }
    __syncthreads();
  }
}

struct Case {
  int64_t m, n, k;
  int ways;  // 1: the plain order (gemm_ar), > 1: interleaved owners (gemm_rs)
};

void run_case(const Case& c, int watcher_blocks) {
  const DType dt = DType::kBF16;
  const int64_t m_tiles = (c.m + kTm - 1) / kTm, n_tiles = (c.n + kTn - 1) / kTn;
  Stream gemm_stream = Stream::create(), side = Stream::highest_priority();
  const cudaStream_t s1 = gemm_stream.get(), s2 = side.get();
  DeviceBuffer a(c.m * c.k * 2), b(c.n * c.k * 2), d(c.m * c.n * 2), mirror(c.m * c.n * 2);
  DeviceBuffer ref(c.m * c.n * sizeof(float)), flags(m_tiles * n_tiles * sizeof(uint64_t)), seq(sizeof(uint64_t));
  testing::fill_random(a.get(), dt, 1, c.m, c.k, 0, c.m, 41, s1);
  testing::fill_random(b.get(), dt, 1, c.n, c.k, 0, c.n, 42, s1);
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref.get(), 0, ref.bytes(), s1));
  testing::reference_gemm(a.get(), b.get(), nullptr, ref.as<float>(), c.m, c.n, c.k, 1, dt, BLayout::kNK, 1.0f, 0.0f,
                          testing::RefEngine::kNaive, nullptr, s1);
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(flags.get(), 0, flags.bytes(), s1));
  const uint64_t call_seq = 7;
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(seq.get(), &call_seq, sizeof(call_seq), cudaMemcpyHostToDevice, s1));
  testing::poison(d.get(), c.m * c.n, dt, s1);
  testing::poison(mirror.get(), c.m * c.n, dt, s1);
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(s1));

  int sms = 0;
  TPGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  gemm::MatmulShape shape = gemm::packed_shape(c.m, c.n, c.k, 1, dt, BLayout::kNK);
  // Two SMs per watcher block: a block can break up a pair of SMs the GEMM's clusters of two
  // would take, and a GEMM CTA left without an SM would never raise the flags a watcher waits for.
  shape.sm_count = sms - 2 * watcher_blocks;
  gemm::sm90::TileRowOrder order;
  if (c.ways > 1) order.ways = c.ways, order.way_rows = c.m / c.ways;
  gemm::sm90::TileSignal signal;
  signal.flags = flags.as<uint64_t>();
  signal.seq = seq.as<uint64_t>();
  signal.m_tiles = m_tiles, signal.n_tiles = n_tiles;
  const gemm::Sm90Gemm mm(shape, order, signal);
  const DeviceBuffer ws(mm.workspace_bytes());
  const comm::TimeoutMailbox mailbox;
  copy_tiles_as_flagged<<<watcher_blocks, 256, 0, s2>>>(flags.as<uint64_t>(), seq.as<uint64_t>(),
                                                       d.as<__nv_bfloat16>(), mirror.as<__nv_bfloat16>(), c.m, c.n,
                                                       m_tiles, n_tiles, mailbox.env(0, 5000));
  TPGEMM_CHECK_LAUNCH();
  mm.run(a.get(), b.get(), nullptr, d.get(), 1.0f, 0.0f, ws.get(), s1);
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(s1));
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(s2));
  const std::string what = strfmt("M=%lld N=%lld K=%lld ways=%d", (long long)c.m, (long long)c.n, (long long)c.k, c.ways);
  const Status st = mailbox.status();
  ASSERT_TRUE(st.ok()) << what << ": " << st.message;
  for (const auto& [name, out] : {std::pair{"D", &d}, std::pair{"the copy taken at each flag", &mirror}}) {
    const testing::Diff diff = testing::compare(out->get(), dt, ref.as<float>(), 1, c.m * c.n, 0, 0, 0, s1);
    EXPECT_TRUE(diff.passes(testing::default_eps(dt)))
        << what << ": " << name << ": rel_err " << diff.rel_err << ", " << diff.nonfinite << " non-finite";
  }
}

TEST(TileSignalKernel, RaisesEachTilesFlagOnlyOnceItsDataIsInPlace) {
  TPGEMM_REQUIRE_GPUS(1);
  TPGEMM_CUDA_CHECK(cudaSetDevice(0));
  load_kernel_now(copy_tiles_as_flagged);
  // Several waves in both orders; tiles cut at M and N (1000 x 8000); one wave of small tiles.
  for (const Case& c : {Case{2048, 8192, 2048, 1}, Case{2048, 8192, 2048, 4}, Case{1000, 8000, 1024, 1},
                        Case{512, 4096, 512, 2}})
    run_case(c, 8);
}

}  // namespace
}  // namespace tpgemm
