// Session 14 probe for NOTE [own rows in place]: does a device-local cudaMemcpyAsync (the fused
// ag_gemm's own rows into G) keep its speed beside a kernel that holds all SMs but a few? If the
// driver runs it on a copy engine, yes; if on SMs, it crawls on the few left free (the likely
// cause of the early launch's 0.61-0.81x, bench/results/2026-11-22-ladder/early-launch-reverted).
// One GPU. Prints, per size: alone, and beside a spinning kernel on all SMs but `free` (1 and 8).
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)
// One block per SM (1024 threads, 160 KB of shared memory: nothing else fits beside it), spinning
// on %globaltimer for `ns`.
__global__ void hold(long ns) {
  extern __shared__ char smem[];
  long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); smem[threadIdx.x] = 0; } while (t - t0 < ns);
}
int main() {
  char *a, *b; const size_t big = size_t(128) << 20;
  CK(cudaMalloc(&a, big)); CK(cudaMalloc(&b, big)); CK(cudaMemset(a, 1, big));
  cudaStream_t s, h; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int smem = 160 << 10;
  CK(cudaFuncSetAttribute(hold, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  hold<<<1, 1024, smem, h>>>(1000); CK(cudaDeviceSynchronize());  // loaded before it is timed beside
  for (size_t mb : {2, 8, 16, 32, 64, 128}) {
    const size_t n = mb << 20;
    for (int free : {-1, 8, 1}) {  // -1: alone
      std::vector<float> t;
      for (int i = 0; i < 12; ++i) {
        if (free >= 0) hold<<<sms - free, 1024, smem, h>>>(3000000);  // 3 ms: longer than any copy alone
        CK(cudaEventRecord(e0, s));
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
        CK(cudaDeviceSynchronize());
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 2) t.push_back(ms * 1000);
      }
      std::sort(t.begin(), t.end());
      printf("%4zu MB %-22s: %9.1f us  %6.0f GB/s\n", mb, free < 0 ? "alone" : free == 8 ? "beside, 8 SMs free" : "beside, 1 SM free",
             t[t.size() / 2], n / t[t.size() / 2] / 1e3);
    }
  }
  return 0;
}
