// The boundary between tpgemm and the CUTLASS kernels: plain arguments and one table of
// functions per kernel, so that only the src/gemm/sm90/*.cu files include CUTLASS (and each
// compiles one configuration, in parallel with the others).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace tpgemm::gemm::sm90 {

// Row-major D[l][m][n] = alpha * A[l][m][k] * op(B[l]) + beta * C[l][m][n]; strides in elements.
struct Args {
  int m = 0, n = 0, k = 0, l = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // never null: D stands in for it when there is no C (then beta = 0 and it is not read)
  void* d = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  float alpha = 1.0f, beta = 0.0f;
  int device = 0;
  int sm_count = 0;             // persistent grid: at most this many CTAs
  int max_active_clusters = 0;  // from prepare(); 0 = unknown
  int swizzle = 1;              // tile scheduler: max swizzle (1, 2, 4 or 8)
  int raster = 0;               // 0 heuristic, 1 along M, 2 along N
};

// One kernel (configuration x dtype x B layout).
struct KernelFns {
  bool (*implementable)(const Args&);  // CUTLASS's can_implement (alignment, extents); host only
  size_t (*workspace_bytes)(const Args&);  // host only
  // Once per plan, on the current device: raises the kernel's shared-memory limit and returns
  // how many of its clusters fit on the device at once (the persistent grid is sized by it).
  int (*prepare)();
  // Enqueues the kernel. `workspace` holds workspace_bytes(args) bytes (may be null if 0).
  void (*run)(const Args&, void* workspace, cudaStream_t stream);
};

// Per configuration, indexed [dtype][b layout]: dtype 0 bf16, 1 fp16; layout 0 kKN, 1 kNK
// (tpgemm's enum values). A null `run` means not compiled.
struct KernelTable {
  KernelFns fns[2][2];
};

}  // namespace tpgemm::gemm::sm90
