// Session 11 probe: the SM pull kernel alone (NOTE [sm pull]) on two GPUs of one process, W=2:
// how long it takes to gather a block of rows, by blocks (SMs) and pieces.
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <vector>
#include "ops/ag_gemm/sm_pull.h"
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); return 1; } } while (0)
using namespace tpgemm;
int main() {
  const int W = 2;
  for (int64_t mw : {256, 128}) for (int pieces : {1, 4, 16}) for (int blocks : {2, 4, 8, 16, 32}) {
    const int64_t k = 8192, m = mw * W, es = 2;
    const int slices = ops::sm_pull_slices(mw, 1, k, pieces, es);
    void *a[W], *g[W], *pad[W]; uint64_t* ctl[W]; void **gt[W], **pt[W]; cudaStream_t st[W];
    int32_t* tripped[W];
    for (int r = 0; r < W; ++r) {
      CK(cudaSetDevice(r)); cudaDeviceEnablePeerAccess(1 - r, 0); cudaGetLastError();
      CK(cudaMalloc(&a[r], mw * k * es)); CK(cudaMemset(a[r], r + 1, mw * k * es));
      CK(cudaMalloc(&g[r], m * k * es)); CK(cudaMalloc(&pad[r], ops::sm_pull_pad_words(W, pieces) * 8));
      CK(cudaMemset(pad[r], 0, ops::sm_pull_pad_words(W, pieces) * 8));
      CK(cudaMalloc(&ctl[r], ops::sm_pull_control_words(pieces) * 8)); CK(cudaMemset(ctl[r], 0, ops::sm_pull_control_words(pieces) * 8));
      CK(cudaMalloc(&gt[r], W * 8)); CK(cudaMalloc(&pt[r], W * 8)); CK(cudaMalloc(&tripped[r], 4)); CK(cudaMemset(tripped[r], 0, 4));
      CK(cudaStreamCreateWithFlags(&st[r], cudaStreamNonBlocking));
    }
    for (int r = 0; r < W; ++r) { CK(cudaSetDevice(r)); CK(cudaMemcpy(gt[r], g, W * 8, cudaMemcpyHostToDevice)); CK(cudaMemcpy(pt[r], pad, W * 8, cudaMemcpyHostToDevice)); CK(cudaDeviceSynchronize()); }
    cudaEvent_t e0[W], e1[W];
    std::vector<float> t;
    for (int it = 0; it < 23; ++it) {
      for (int r = 0; r < W; ++r) { CK(cudaSetDevice(r)); CK(cudaDeviceSynchronize()); }
      for (int r = 0; r < W; ++r) {
        CK(cudaSetDevice(r));
        if (it == 0) { CK(cudaEventCreate(&e0[r])); CK(cudaEventCreate(&e1[r])); }
        ops::SmPullArgs x; x.a = a[r]; x.g = gt[r]; x.pads = pt[r]; x.control = ctl[r]; x.m = m; x.k = k; x.l = 1;
        x.rows_per_rank = mw; x.elem_bytes = es; x.pieces = pieces; x.slices = slices; x.rank = r; x.world = W;
        x.env.tripped = tripped[r]; x.env.timeout_ns = 2000000000ull; x.env.rank = r;
        ops::launch_sm_pull_begin(ctl[r], pieces, slices, st[r]);
        CK(cudaEventRecord(e0[r], st[r]));
        ops::launch_sm_pull(x, blocks, st[r]);
        CK(cudaEventRecord(e1[r], st[r]));
      }
      float mx = 0;
      for (int r = 0; r < W; ++r) { CK(cudaSetDevice(r)); CK(cudaEventSynchronize(e1[r])); float ms; CK(cudaEventElapsedTime(&ms, e0[r], e1[r])); mx = std::max(mx, ms); }
      if (it >= 3) t.push_back(mx * 1000);
    }
    std::sort(t.begin(), t.end());
    printf("rows/rank %4lld K %lld pieces %2d slices %d blocks %2d: %7.1f us  (%.0f GB/s pulled, own copy too)\n", (long long)mw, (long long)k, pieces, slices, blocks, t[t.size() / 2], mw * k * es / t[t.size() / 2] / 1e3);
    for (int r = 0; r < W; ++r) { CK(cudaSetDevice(r)); cudaFree(a[r]); cudaFree(g[r]); cudaFree(pad[r]); cudaFree(ctl[r]); cudaFree(gt[r]); cudaFree(pt[r]); }
  }
  return 0;
}
