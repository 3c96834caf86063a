#include <algorithm>
#include <type_traits>

#include "core/check.h"
#include "ops/common/elementwise.h"
#include "ops/common/vec.cuh"

namespace tpgemm::ops {
namespace {

// Vectors [0, l * per_batch); vector v is at batch v / per_batch, offset (v % per_batch) * 8
// from `first` within each batch entry of `batch_elems` elements.
template <typename T>
__global__ void add_scaled_kernel(T* d, const T* c, float beta, int64_t l, int64_t per_batch, int64_t batch_elems,
                                  int64_t first) {
  const int64_t total = l * per_batch;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = v / per_batch;
    const int64_t i0 = b * batch_elems + first + (v - b * per_batch) * 8;
    if constexpr (std::is_same_v<T, float>) {  // an fp32 D (GemmProblem::out_dtype): two float4 a vector
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float4 acc = reinterpret_cast<const float4*>(d + i0)[h];
        const float4 x = reinterpret_cast<const float4*>(c + i0)[h];
        acc.x += beta * x.x, acc.y += beta * x.y, acc.z += beta * x.z, acc.w += beta * x.w;
        reinterpret_cast<float4*>(d + i0)[h] = acc;
      }
    } else {
      float acc[8], x[8];
      load8(d + i0, acc);
      load8(c + i0, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += beta * x[i];
      store8(d + i0, acc);
    }
  }
}

void launch_add_scaled(void* d, const void* c, float beta, int64_t l, int64_t per_batch, int64_t batch_elems,
                       int64_t first, DType dtype, int num_sms, cudaStream_t stream) {
  const int64_t vecs = l * per_batch;
  if (vecs == 0) return;
  const int threads = 256;
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((vecs + threads - 1) / threads, num_sms * 8)));
  if (dtype == DType::kFP32)
    add_scaled_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(d), static_cast<const float*>(c), beta, l,
                                                       per_batch, batch_elems, first);
  else if (dtype == DType::kBF16)
    add_scaled_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(d), static_cast<const __nv_bfloat16*>(c),
                                                       beta, l, per_batch, batch_elems, first);
  else
    add_scaled_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(d), static_cast<const __half*>(c), beta, l,
                                                       per_batch, batch_elems, first);
  TPGEMM_CHECK_LAUNCH();
}

}  // namespace

void add_scaled(void* d, const void* c, float beta, int64_t count, DType dtype, int num_sms, cudaStream_t stream) {
  launch_add_scaled(d, c, beta, 1, count / 8, count, 0, dtype, num_sms, stream);
}

void add_scaled_rows(void* d, const void* c, float beta, int64_t l, int64_t rows, int64_t n, int64_t row0, int64_t nrows,
                     DType dtype, int num_sms, cudaStream_t stream) {
  launch_add_scaled(d, c, beta, l, nrows * n / 8, rows * n, row0 * n, dtype, num_sms, stream);
}

}  // namespace tpgemm::ops
