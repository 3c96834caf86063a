// Session 11 probe: a device-local copy (fused ag_gemm's own rows into G) by a copy engine
// (cudaMemcpyAsync D2D) against an SM kernel, on one GPU.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)
__global__ void copy_kernel(uint4* __restrict__ d, const uint4* __restrict__ s, long n) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) d[i] = s[i];
}
int main() {
  char *a, *b; const size_t big = size_t(256) << 20;
  CK(cudaMalloc(&a, big)); CK(cudaMalloc(&b, big)); CK(cudaMemset(a, 1, big));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (size_t mb : {2, 4, 8, 16, 32, 64, 128}) {
    const size_t n = mb << 20;
    for (int way = 0; way < 2; ++way) {
      std::vector<float> t;
      for (int i = 0; i < 30; ++i) {
        CK(cudaEventRecord(e0, s));
        if (way == 0) CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, s));
        else copy_kernel<<<sms * 4, 512, 0, s>>>((uint4*)b, (const uint4*)a, (long)(n / 16));
        CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 5) t.push_back(ms * 1000);
      }
      std::sort(t.begin(), t.end());
      printf("%4zu MB %s: %8.2f us  %6.0f GB/s\n", mb, way ? "SM kernel " : "copy engine", t[t.size() / 2], n / t[t.size() / 2] / 1e3);
    }
  }
  return 0;
}
