// Experiment (not part of tpgemm): the cost of way (b) of the fused AllGather+GEMM, "TMA reads A
// tiles straight from the owner's buffer". One process, two GPUs: tpgemm's Hopper GEMM core on
// GPU 0 with A in GPU 0's memory, then with A in GPU 1's memory (peer access over NVLink, read by
// the core's TMA loads), same B and D. Checks that both give the same D, bit for bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gemm/sm90_gemm.h"

#define CK(x)                                                                                        \
  do {                                                                                               \
    cudaError_t e_ = (x);                                                                            \
    if (e_ != cudaSuccess) {                                                                         \
      std::printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x);  \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

__global__ void fill_random(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = __float2bfloat16(static_cast<float>(x & 0xffff) / 65536.0f - 0.5f);
  }
}

template <class F>
float median_us(F launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i) launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> ts;
  for (int r = 0; r < 15; ++r) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 10; ++i) launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms * 100.0f);
  }
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

int main() {
  using namespace tpgemm;
  int n_gpus = 0;
  CK(cudaGetDeviceCount(&n_gpus));
  if (n_gpus < 2) { std::printf("needs 2 GPUs\n"); return 1; }
  int can = 0;
  CK(cudaDeviceCanAccessPeer(&can, 0, 1));
  std::printf("GPU 0 can access GPU 1: %d\n", can);
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  const int64_t shapes[][3] = {{512, 8192, 8192}, {1024, 8192, 8192}, {2048, 3584, 8192}, {4096, 8192, 8192}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    __nv_bfloat16 *a_local, *a_remote, *b, *d_local, *d_remote;
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&a_remote, m * k * 2));
    fill_random<<<1024, 256>>>(a_remote, m * k, 1u);
    CK(cudaDeviceSynchronize());
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&a_local, m * k * 2));
    CK(cudaMalloc(&b, n * k * 2));
    CK(cudaMalloc(&d_local, m * n * 2));
    CK(cudaMalloc(&d_remote, m * n * 2));
    fill_random<<<1024, 256>>>(a_local, m * k, 1u);  // the same values as a_remote
    fill_random<<<1024, 256>>>(b, n * k, 2u);
    CK(cudaMemset(d_local, 0xff, m * n * 2));
    CK(cudaMemset(d_remote, 0xff, m * n * 2));
    CK(cudaDeviceSynchronize());
    const gemm::MatmulShape shape = gemm::packed_shape(m, n, k, 1, DType::kBF16, BLayout::kNK);
    gemm::Sm90Gemm g(shape);
    void* ws = nullptr;
    if (g.workspace_bytes()) CK(cudaMalloc(&ws, g.workspace_bytes()));
    auto local = [&] { g.run(a_local, b, nullptr, d_local, 1.0f, 0.0f, ws, 0); };
    auto remote = [&] { g.run(a_remote, b, nullptr, d_remote, 1.0f, 0.0f, ws, 0); };
    local();
    remote();
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> h1(m * n), h2(m * n);
    CK(cudaMemcpy(h1.data(), d_local, m * n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2.data(), d_remote, m * n * 2, cudaMemcpyDeviceToHost));
    const bool same = std::memcmp(h1.data(), h2.data(), m * n * 2) == 0;
    const bool poisoned = std::count(h1.begin(), h1.end(), uint16_t(0xffff)) > 0;
    const float t_local = median_us(local), t_remote = median_us(remote);
    const double a_bytes = double(m) * k * 2;
    const int64_t tile_cols = (n + 255) / 256;
    std::printf("%5ld x %5ld x %5ld  config %-22s  A local %8.1f us  A on the peer %8.1f us  (%.2fx)  "
                "A = %.0f MiB, read by %ld tile columns: %.1f GB/s of A over NVLink if each reads it  D same: %s%s\n",
                (long)m, (long)n, (long)k, g.config(), t_local, t_remote, t_remote / t_local, a_bytes / (1 << 20),
                (long)tile_cols, a_bytes * tile_cols / (t_remote * 1e3), same ? "yes" : "NO", poisoned ? " (POISON LEFT)" : "");
    CK(cudaFree(a_local)); CK(cudaFree(b)); CK(cudaFree(d_local)); CK(cudaFree(d_remote));
    if (ws) CK(cudaFree(ws));
    CK(cudaSetDevice(1));
    CK(cudaFree(a_remote));
    CK(cudaSetDevice(0));
  }
  std::printf("done\n");
  return 0;
}
