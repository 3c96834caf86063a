#include <algorithm>
#include <type_traits>

#include "core/check.h"
#include "ops/common/elementwise.h"
#include "ops/common/vec.cuh"

namespace tpgemm::ops {
namespace {

// l batch entries of `rows` rows of `cols` elements (cols a multiple of 8); vector v (8 elements)
// is at batch b = v / (rows * cols / 8), then row and column within it. An element sits at
// b * batch + first + row * ld + column: batch_d and ld_d in d, batch_c and ld_c in c.
template <typename T>
__global__ void add_scaled_kernel(T* d, const T* c, float beta, int64_t l, int64_t rows, int64_t cols, int64_t ld_d,
                                  int64_t ld_c, int64_t batch_d, int64_t batch_c, int64_t first) {
  const int64_t row_vecs = cols / 8, per_batch = rows * row_vecs, total = l * per_batch;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = v / per_batch, in_batch = v - b * per_batch;
    const int64_t row = in_batch / row_vecs, col = (in_batch - row * row_vecs) * 8;
    T* dp = d + b * batch_d + first + row * ld_d + col;
    const T* cp = c + b * batch_c + first + row * ld_c + col;
    if constexpr (std::is_same_v<T, float>) {  // an fp32 D (GemmProblem::out_dtype): two float4 a vector
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float4 acc = reinterpret_cast<const float4*>(dp)[h];
        const float4 x = reinterpret_cast<const float4*>(cp)[h];
        acc.x += beta * x.x, acc.y += beta * x.y, acc.z += beta * x.z, acc.w += beta * x.w;
        reinterpret_cast<float4*>(dp)[h] = acc;
      }
    } else {
      float acc[8], x[8];
      load8(dp, acc);
      load8(cp, x);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += beta * x[i];
      store8(dp, acc);
    }
  }
}

void launch_add_scaled(void* d, const void* c, float beta, int64_t l, int64_t rows, int64_t cols, int64_t ld_d,
                       int64_t ld_c, int64_t batch_d, int64_t batch_c, int64_t first, DType dtype, int num_sms,
                       cudaStream_t stream) {
  const int64_t vecs = l * rows * (cols / 8);
  if (vecs == 0) return;
  const int threads = 256;
  const int blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((vecs + threads - 1) / threads, num_sms * 8)));
  if (dtype == DType::kFP32)
    add_scaled_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(d), static_cast<const float*>(c), beta, l,
                                                       rows, cols, ld_d, ld_c, batch_d, batch_c, first);
  else if (dtype == DType::kBF16)
    add_scaled_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(d), static_cast<const __nv_bfloat16*>(c),
                                                       beta, l, rows, cols, ld_d, ld_c, batch_d, batch_c, first);
  else
    add_scaled_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(d), static_cast<const __half*>(c), beta, l,
                                                       rows, cols, ld_d, ld_c, batch_d, batch_c, first);
  TPGEMM_CHECK_LAUNCH();
}

}  // namespace

void add_scaled(void* d, const void* c, float beta, int64_t count, DType dtype, int num_sms, cudaStream_t stream) {
  launch_add_scaled(d, c, beta, 1, 1, count, count, count, count, count, 0, dtype, num_sms, stream);
}

void add_scaled_rows(void* d, const void* c, float beta, int64_t l, int64_t rows, int64_t n, int64_t row0, int64_t nrows,
                     DType dtype, int num_sms, cudaStream_t stream) {
  launch_add_scaled(d, c, beta, l, nrows, n, n, n, rows * n, rows * n, row0 * n, dtype, num_sms, stream);
}

void add_scaled_strided(void* d, int64_t ld_d, int64_t batch_d, const void* c, int64_t ld_c, int64_t batch_c, float beta,
                        int64_t l, int64_t rows, int64_t cols, DType dtype, int num_sms, cudaStream_t stream) {
  launch_add_scaled(d, c, beta, l, rows, cols, ld_d, ld_c, batch_d, batch_c, 0, dtype, num_sms, stream);
}

}  // namespace tpgemm::ops
