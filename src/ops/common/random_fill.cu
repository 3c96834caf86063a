#include "ops/common/random_fill.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "core/check.h"

namespace tpgemm::ops {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__device__ __forceinline__ T from_float(float f);
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float f) { return __float2bfloat16_rn(f); }
template <>
__device__ __forceinline__ __half from_float(float f) { return __float2half_rn(f); }
template <>
__device__ __forceinline__ float from_float(float f) { return f; }
template <>
__device__ __forceinline__ __nv_fp8_e4m3 from_float(float f) { return __nv_fp8_e4m3(f); }
template <>
__device__ __forceinline__ __nv_fp8_e5m2 from_float(float f) { return __nv_fp8_e5m2(f); }

template <typename T>
__global__ void fill_kernel(T* p, int64_t l, int64_t rows, int64_t cols, int64_t row_offset, int64_t total_rows, uint64_t seed) {
  const int64_t n = l * rows * cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / (rows * cols), rem = i - b * rows * cols;
    const int64_t global = (b * total_rows + row_offset) * cols + rem;
    const uint64_t h = splitmix64(seed * 0x2545f4914f6cdd1dull ^ static_cast<uint64_t>(global));
    const float u = static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = from_float<T>(2.0f * u - 1.0f);
  }
}

}  // namespace

void fill_random(void* p, DType dtype, int64_t l, int64_t rows, int64_t cols, int64_t row_offset, int64_t total_rows,
                 uint64_t seed, cudaStream_t stream) {
  const int64_t n = l * rows * cols;
  if (n == 0) return;
  const int grid = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 4096)));
  if (dtype == DType::kFP32)
    fill_kernel<<<grid, 256, 0, stream>>>(static_cast<float*>(p), l, rows, cols, row_offset, total_rows, seed);
  else if (dtype == DType::kE5M2)
    fill_kernel<<<grid, 256, 0, stream>>>(static_cast<__nv_fp8_e5m2*>(p), l, rows, cols, row_offset, total_rows, seed);
  else if (dtype == DType::kE4M3)
    fill_kernel<<<grid, 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(p), l, rows, cols, row_offset, total_rows, seed);
  else if (dtype == DType::kBF16)
    fill_kernel<<<grid, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(p), l, rows, cols, row_offset, total_rows, seed);
  else
    fill_kernel<<<grid, 256, 0, stream>>>(static_cast<__half*>(p), l, rows, cols, row_offset, total_rows, seed);
  TPGEMM_CHECK_LAUNCH();
}

}  // namespace tpgemm::ops
