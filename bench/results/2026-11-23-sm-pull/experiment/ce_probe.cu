// Session 11 probe: how fast do copy engines pull from a peer, 1D and 2D, idle and beside a kernel
// that holds every SM? (fused ag_gemm's one-wave case: is the pull, not the GEMM, the long part?)
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

__global__ void spin(long long ns) {
  long long t0; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) { long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); if (t - t0 > ns) break; }
}

struct Timer {
  cudaEvent_t a, b;
  Timer() { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
};

template <class F>
float median_us(cudaStream_t s, F f, int reps = 25) {
  Timer t; std::vector<float> v;
  for (int i = 0; i < reps + 3; ++i) {
    CK(cudaEventRecord(t.a, s)); f(); CK(cudaEventRecord(t.b, s)); CK(cudaEventSynchronize(t.b));
    float ms; CK(cudaEventElapsedTime(&ms, t.a, t.b)); if (i >= 3) v.push_back(ms * 1000);
  }
  std::sort(v.begin(), v.end()); return v[v.size() / 2];
}

int main() {
  int n; CK(cudaGetDeviceCount(&n)); if (n < 2) { printf("need 2 GPUs\n"); return 1; }
  const size_t big = 64 << 20;
  char *src, *dst;
  CK(cudaSetDevice(1)); CK(cudaMalloc(&src, big)); CK(cudaMemset(src, 1, big));
  CK(cudaSetDevice(0)); CK(cudaMalloc(&dst, big)); CK(cudaDeviceEnablePeerAccess(1, 0));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s, s2; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  printf("1D pull from GPU1 -> GPU0, idle\n");
  for (size_t sz : {size_t(256) << 10, size_t(512) << 10, size_t(1) << 20, size_t(2) << 20, size_t(4) << 20, size_t(8) << 20, size_t(32) << 20}) {
    float us = median_us(s, [&] { CK(cudaMemcpyAsync(dst, src, sz, cudaMemcpyDeviceToDevice, s)); });
    printf("  %6zu KB  %7.2f us  %6.1f GB/s\n", sz >> 10, us, sz / us / 1e3);
  }
  printf("1D pull split into N copies in a row (same total 2 MB / 4 MB)\n");
  for (size_t tot : {size_t(2) << 20, size_t(4) << 20})
    for (int parts : {1, 2, 4, 8, 16}) {
      float us = median_us(s, [&] { for (int i = 0; i < parts; ++i) CK(cudaMemcpyAsync(dst + i * (tot / parts), src + i * (tot / parts), tot / parts, cudaMemcpyDeviceToDevice, s)); });
      printf("  %zu KB in %2d: %7.2f us\n", tot >> 10, parts, us);
    }
  printf("2D pull: rows x width (pitch 16 KB, a K=8192 bf16 row)\n");
  for (int rows : {128, 256, 512})
    for (size_t w : {size_t(2048), size_t(4096), size_t(8192), size_t(16384)}) {
      float us = median_us(s, [&] { CK(cudaMemcpy2DAsync(dst, 16384, src, 16384, w, rows, cudaMemcpyDeviceToDevice, s)); });
      printf("  %4d x %5zu B  %7.2f us  %6.1f GB/s\n", rows, w, us, rows * w / us / 1e3);
    }
  printf("beside a kernel holding every SM (spin 200 us on another stream): copy's own time, and the spin's\n");
  for (size_t sz : {size_t(2) << 20, size_t(4) << 20}) {
    Timer t, ts; std::vector<float> v, vs;
    for (int i = 0; i < 10; ++i) {
      CK(cudaEventRecord(ts.a, s2)); spin<<<prop.multiProcessorCount * 8, 128, 0, s2>>>(200000); CK(cudaEventRecord(ts.b, s2));
      CK(cudaEventRecord(t.a, s)); CK(cudaMemcpyAsync(dst, src, sz, cudaMemcpyDeviceToDevice, s)); CK(cudaEventRecord(t.b, s));
      CK(cudaDeviceSynchronize()); float a, b; CK(cudaEventElapsedTime(&a, t.a, t.b)); CK(cudaEventElapsedTime(&b, ts.a, ts.b));
      v.push_back(a * 1000); vs.push_back(b * 1000);
    }
    std::sort(v.begin(), v.end()); std::sort(vs.begin(), vs.end());
    printf("  1D %zu KB: copy %7.2f us (spin %7.2f)\n", sz >> 10, v[5], vs[5]);
    v.clear(); vs.clear();
    for (int i = 0; i < 10; ++i) {
      CK(cudaEventRecord(ts.a, s2)); spin<<<prop.multiProcessorCount * 8, 128, 0, s2>>>(200000); CK(cudaEventRecord(ts.b, s2));
      CK(cudaEventRecord(t.a, s)); CK(cudaMemcpy2DAsync(dst, 16384, src, 16384, 4096, sz / 4096, cudaMemcpyDeviceToDevice, s)); CK(cudaEventRecord(t.b, s));
      CK(cudaDeviceSynchronize()); float a, b; CK(cudaEventElapsedTime(&a, t.a, t.b)); CK(cudaEventElapsedTime(&b, ts.a, ts.b));
      v.push_back(a * 1000); vs.push_back(b * 1000);
    }
    std::sort(v.begin(), v.end()); std::sort(vs.begin(), vs.end());
    printf("  2D %zu KB (4 KB rows): copy %7.2f us (spin %7.2f)\n", sz >> 10, v[5], vs[5]);
  }
  printf("ok\n");
  return 0;
}
