#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "gemm/lt_matmul.h"
#include "ops/common/random_fill.h"
#include "testing/testing.h"
#include "tpgemm/plan.h"

namespace tpgemm::testing {
namespace {

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float(float v) { return v; }
template <>
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float(__nv_fp8_e5m2 v) { return static_cast<float>(v); }

__global__ void poison_kernel(uint16_t* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) p[i] = 0xFFFF;
}

template <typename T, typename TB = T>
__global__ void naive_gemm_kernel(const T* a, const TB* b, const T* c, float* ref, int64_t m, int64_t n, int64_t k,
                                  bool b_nk, float alpha, float beta, const float* row_scale, const float* col_scale) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t i = blockIdx.y * int64_t(blockDim.y) + threadIdx.y;
  const int64_t batch = blockIdx.z;
  if (i >= m || j >= n) return;
  const T* ab = a + batch * m * k;
  const TB* bb = b + batch * k * n;
  float acc = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float bv = to_float(b_nk ? bb[j * k + kk] : bb[kk * n + j]);
    acc += to_float(ab[i * k + kk]) * bv;
  }
  const int64_t o = (batch * m + i) * n + j;
  if (row_scale != nullptr) acc *= row_scale[i];
  if (col_scale != nullptr) acc *= col_scale[j];
  float v = ref[o] + alpha * acc;
  if (c != nullptr) v += beta * to_float(c[o]);
  ref[o] = v;
}

// e4m3 A and B ([N, K]) with block scales: each 128-column piece of K's products times its two scales.
__global__ void naive_block_gemm_kernel(const __nv_fp8_e4m3* a, const __nv_fp8_e4m3* b, float* ref, int64_t m, int64_t n,
                                        int64_t k, float alpha, const float* a_scale, const float* b_scale,
                                        int64_t b_scale_ld) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t i = blockIdx.y * int64_t(blockDim.y) + threadIdx.y;
  if (i >= m || j >= n) return;
  float acc = 0.0f;
  for (int64_t k0 = 0, kb = 0; k0 < k; k0 += kScaleBlock, ++kb) {
    float part = 0.0f;
    for (int64_t kk = k0; kk < min(k0 + kScaleBlock, k); ++kk) part += to_float(a[i * k + kk]) * to_float(b[j * k + kk]);
    acc += part * a_scale[kb * m + i] * b_scale[(j / kScaleBlock) * b_scale_ld + kb];
  }
  ref[i * n + j] += alpha * acc;
}

// out[kb * n + j] = b_scale[(j / 128) * b_scale_ld + kb]: each K block's scale of every column of D.
__global__ void expand_b_blocks_kernel(float* out, const float* b_scale, int64_t n, int64_t k_blocks, int64_t b_scale_ld) {
  const int64_t count = n * k_blocks;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t kb = e / n, j = e - kb * n;
    out[e] = b_scale[(j / kScaleBlock) * b_scale_ld + kb];
  }
}

template <typename T>
__global__ void transpose_kernel(T* dst, int64_t ld, const T* src, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / cols, j = e - i * cols;
    dst[j * ld + i] = src[e];
  }
}

template <typename T>
__global__ void add_c_kernel(float* ref, const T* c, float beta, int64_t count) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x)
    ref[i] += beta * to_float(c[i]);
}

template <typename T>
__global__ void diff_kernel(const T* out, const float* ref, int64_t l, int64_t span, int64_t out_stride, int64_t ref_stride,
                            int64_t ref_offset, double* sums, unsigned long long* nonfinite) {
  double d2 = 0, r2 = 0;
  unsigned long long bad = 0;
  const int64_t n = l * span;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / span, e = i - b * span;
    const float o = to_float(out[b * out_stride + e]);
    const double r = ref[b * ref_stride + ref_offset + e];
    if (!isfinite(o)) {
      ++bad;
      continue;
    }
    d2 += (o - r) * (o - r);
    r2 += r * r;
  }
  for (int off = 16; off > 0; off /= 2) {
    d2 += __shfl_down_sync(0xffffffffu, d2, off);
    r2 += __shfl_down_sync(0xffffffffu, r2, off);
    bad += __shfl_down_sync(0xffffffffu, bad, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(sums, d2);
    atomicAdd(sums + 1, r2);
    atomicAdd(nonfinite, bad);
  }
}

int grid_for(int64_t n) { return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>((n + 255) / 256, 4096))); }

}  // namespace

void fill_random(void* p, DType dtype, int64_t l, int64_t rows, int64_t cols, int64_t row_offset, int64_t total_rows,
                 uint64_t seed, cudaStream_t stream) {
  ops::fill_random(p, dtype, l, rows, cols, row_offset, total_rows, seed, stream);
}

void poison(void* p, int64_t count, DType dtype, cudaStream_t stream) {
  const int64_t halves = count * static_cast<int64_t>(dtype_size(dtype)) / 2;  // all ones: NaN in fp32 too
  poison_kernel<<<grid_for(halves), 256, 0, stream>>>(static_cast<uint16_t*>(p), halves);
  TPGEMM_CHECK_LAUNCH();
}

void transpose_into(void* dst, int64_t ld, const void* src, int64_t rows, int64_t cols, DType dtype, cudaStream_t stream) {
  const int grid = grid_for(rows * cols);
  switch (dtype_size(dtype)) {
    case 1:
      transpose_kernel<<<grid, 256, 0, stream>>>(static_cast<uint8_t*>(dst), ld, static_cast<const uint8_t*>(src), rows, cols);
      break;
    case 2:
      transpose_kernel<<<grid, 256, 0, stream>>>(static_cast<uint16_t*>(dst), ld, static_cast<const uint16_t*>(src), rows,
                                                 cols);
      break;
    default:
      transpose_kernel<<<grid, 256, 0, stream>>>(static_cast<uint32_t*>(dst), ld, static_cast<const uint32_t*>(src), rows,
                                                 cols);
  }
  TPGEMM_CHECK_LAUNCH();
}

namespace {

// The naive kernel over FP8 A and B of either type (an e5m2 gradient times e4m3, and the reverse).
void naive_fp8(const void* a, DType at, const void* b, DType bt, float* ref, int64_t m, int64_t n, int64_t k, bool nk,
               float alpha, float beta, const float* row_scale, const float* col_scale, dim3 grid, dim3 block,
               cudaStream_t stream) {
  const auto run = [&](auto* ap, auto* bp) {
    using TA = std::remove_const_t<std::remove_pointer_t<decltype(ap)>>;
    naive_gemm_kernel<<<grid, block, 0, stream>>>(ap, bp, static_cast<const TA*>(nullptr), ref, m, n, k, nk, alpha, beta,
                                                  row_scale, col_scale);
  };
  const auto* a4 = static_cast<const __nv_fp8_e4m3*>(a);
  const auto* a5 = static_cast<const __nv_fp8_e5m2*>(a);
  const auto* b4 = static_cast<const __nv_fp8_e4m3*>(b);
  const auto* b5 = static_cast<const __nv_fp8_e5m2*>(b);
  if (at == DType::kE4M3) bt == DType::kE4M3 ? run(a4, b4) : run(a4, b5);
  else bt == DType::kE4M3 ? run(a5, b4) : run(a5, b5);
}

}  // namespace

void reference_gemm(const void* a, const void* b, const void* c, float* ref, int64_t m, int64_t n, int64_t k, int64_t l,
                    DType dtype, BLayout layout, float alpha, float beta, RefEngine engine, cublasLtHandle_t lt,
                    cudaStream_t stream, const float* row_scale, const float* col_scale, std::optional<DType> b_dtype) {
  const DType bt = b_dtype.value_or(dtype);
  if (is_fp8(dtype) && c != nullptr)
    throw Error(ErrorCode::kInvalidArgument, "reference_gemm: FP8 A and B take no C here (add it with reference_add)");
  if (is_fp8(dtype) != is_fp8(bt) || (!is_fp8(dtype) && bt != dtype))
    throw Error(ErrorCode::kInvalidArgument, "reference_gemm: B's type differs from A's, and only FP8 types may differ");
  // cuBLASLt applies both vectors (FP8, one batch entry: ScaleMode::kRow), else the naive kernel.
  const bool lt_vectors = row_scale != nullptr && col_scale != nullptr && is_fp8(dtype) && l == 1;
  if (engine == RefEngine::kNaive || ((row_scale != nullptr || col_scale != nullptr) && !lt_vectors)) {
    const dim3 block(16, 16), grid(static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>((m + 15) / 16),
                                   static_cast<unsigned>(l));
    const bool nk = layout == BLayout::kNK;
    if (dtype == DType::kBF16)
      naive_gemm_kernel<<<grid, block, 0, stream>>>(static_cast<const __nv_bfloat16*>(a), static_cast<const __nv_bfloat16*>(b),
                                                    static_cast<const __nv_bfloat16*>(c), ref, m, n, k, nk, alpha, beta,
                                                    row_scale, col_scale);
    else if (is_fp8(dtype))
      naive_fp8(a, dtype, b, bt, ref, m, n, k, nk, alpha, beta, row_scale, col_scale, grid, block, stream);
    else
      naive_gemm_kernel<<<grid, block, 0, stream>>>(static_cast<const __half*>(a), static_cast<const __half*>(b),
                                                    static_cast<const __half*>(c), ref, m, n, k, nk, alpha, beta,
                                                    row_scale, col_scale);
    TPGEMM_CHECK_LAUNCH();
    return;
  }
  gemm::MatmulShape s = gemm::packed_shape(m, n, k, l, dtype, layout);
  if (bt != dtype) s.b_dtype = bt;
  s.out_dtype = DType::kFP32;
  s.has_c = true;  // accumulate into ref
  if (lt_vectors) s.scale_mode = ScaleMode::kRow;
  const gemm::LtMatmul mm(lt, s);
  DeviceBuffer ws(gemm::LtMatmul::kWorkspaceBytes);
  DeviceBuffer one;  // FP8 with tensor-wise scales: a unit scale for A and B (the caller's are in alpha)
  if (is_fp8(dtype) && !lt_vectors) {
    const float unit = 1.0f;
    one = DeviceBuffer(sizeof(unit));
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(one.get(), &unit, sizeof(unit), cudaMemcpyHostToDevice, stream));
  }
  mm.run(a, b, ref, ref, alpha, 1.0f, ws.get(), stream, lt_vectors ? row_scale : one.as<float>(),
         lt_vectors ? col_scale : one.as<float>());
  if (c != nullptr) reference_add(ref, c, beta, l * m * n, dtype, stream);
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the workspace dies here
}

void reference_gemm_blocks(const void* a, const void* b, float* ref, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a_scale, const float* b_scale, int64_t b_scale_ld, RefEngine engine,
                           cublasLtHandle_t lt, cudaStream_t stream) {
  if (engine == RefEngine::kNaive) {
    const dim3 block(16, 16), grid(static_cast<unsigned>((n + 15) / 16), static_cast<unsigned>((m + 15) / 16));
    naive_block_gemm_kernel<<<grid, block, 0, stream>>>(static_cast<const __nv_fp8_e4m3*>(a),
                                                        static_cast<const __nv_fp8_e4m3*>(b), ref, m, n, k, alpha,
                                                        a_scale, b_scale, b_scale_ld);
    TPGEMM_CHECK_LAUNCH();
    return;
  }
  // One m x n x 128 matmul per K block, accumulated into ref: A's scales of the block are a vector
  // over its rows (kb * m.., 16-byte aligned where m % 4 == 0, as block scales need), B's expanded
  // to one per column of D.
  const int64_t k_blocks = (k + kScaleBlock - 1) / kScaleBlock;
  DeviceBuffer cols(static_cast<size_t>(k_blocks * n) * sizeof(float));
  expand_b_blocks_kernel<<<grid_for(k_blocks * n), 256, 0, stream>>>(cols.as<float>(), b_scale, n, k_blocks, b_scale_ld);
  TPGEMM_CHECK_LAUNCH();
  DeviceBuffer ws(gemm::LtMatmul::kWorkspaceBytes);
  for (int64_t kb = 0; kb < k_blocks; ++kb) {
    const int64_t kw = std::min(kScaleBlock, k - kb * kScaleBlock);
    gemm::MatmulShape s = gemm::packed_shape(m, n, kw, 1, DType::kE4M3, BLayout::kNK);
    s.lda = s.ldb = k;
    s.out_dtype = DType::kFP32;
    s.scale_mode = ScaleMode::kRow;
    s.has_c = true;  // accumulate into ref
    const gemm::LtMatmul mm(lt, s);
    const char* a_kb = static_cast<const char*>(a) + kb * kScaleBlock;  // (one byte an element)
    const char* b_kb = static_cast<const char*>(b) + kb * kScaleBlock;
    mm.run(a_kb, b_kb, ref, ref, alpha, 1.0f, ws.get(), stream, a_scale + kb * m, cols.as<float>() + kb * n);
  }
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the workspace and the columns' scales die here
}

void reference_sum_of_ranks(float* ref, int64_t count, DType dtype, int world, uint64_t seed, cudaStream_t stream) {
  DeviceBuffer input(static_cast<size_t>(count) * dtype_size(dtype));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref, 0, static_cast<size_t>(count) * sizeof(float), stream));
  for (int q = 0; q < world; ++q) {
    fill_random(input.get(), dtype, 1, 1, count, 0, 1, seed + q, stream);
    reference_add(ref, input.get(), 1.0f, count, dtype, stream);
  }
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (input dies here)
}

void reference_add(float* ref, const void* x, float beta, int64_t count, DType dtype, cudaStream_t stream) {
  if (dtype == DType::kFP32)
    add_c_kernel<<<grid_for(count), 256, 0, stream>>>(ref, static_cast<const float*>(x), beta, count);
  else if (dtype == DType::kBF16)
    add_c_kernel<<<grid_for(count), 256, 0, stream>>>(ref, static_cast<const __nv_bfloat16*>(x), beta, count);
  else
    add_c_kernel<<<grid_for(count), 256, 0, stream>>>(ref, static_cast<const __half*>(x), beta, count);
  TPGEMM_CHECK_LAUNCH();
}

Diff compare(const void* out, DType dtype, const float* ref, int64_t l, int64_t span, int64_t out_stride, int64_t ref_stride,
             int64_t ref_offset, cudaStream_t stream) {
  DeviceBuffer acc(2 * sizeof(double) + sizeof(unsigned long long));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(acc.get(), 0, acc.bytes(), stream));
  auto* sums = acc.as<double>();
  auto* bad = reinterpret_cast<unsigned long long*>(sums + 2);
  const int grid = grid_for(l * span);
  if (dtype == DType::kFP32)
    diff_kernel<<<grid, 256, 0, stream>>>(static_cast<const float*>(out), ref, l, span, out_stride, ref_stride,
                                          ref_offset, sums, bad);
  else if (dtype == DType::kBF16)
    diff_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(out), ref, l, span, out_stride, ref_stride,
                                          ref_offset, sums, bad);
  else
    diff_kernel<<<grid, 256, 0, stream>>>(static_cast<const __half*>(out), ref, l, span, out_stride, ref_stride, ref_offset,
                                          sums, bad);
  TPGEMM_CHECK_LAUNCH();
  double h[2];
  unsigned long long hb = 0;
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(h, sums, sizeof(h), cudaMemcpyDeviceToHost, stream));
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(&hb, bad, sizeof(hb), cudaMemcpyDeviceToHost, stream));
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  Diff d;
  d.ref_norm = std::sqrt(h[1]);
  d.rel_err = d.ref_norm > 0 ? std::sqrt(h[0]) / d.ref_norm : 0.0;
  d.nonfinite = static_cast<int64_t>(hb);
  return d;
}

double default_eps(const GemmProblem& p) {
  const double out = default_eps(d_dtype(p));
  return is_fp8(p.dtype) ? std::max(out, 2e-3) : out;
}

double default_eps(DType dtype) {
  // fp32 outputs: only the order of the fp32 sums differs from the reference's.
  return dtype == DType::kBF16 ? 1e-2 : dtype == DType::kFP16 ? 2e-3 : 1e-4;
}

}  // namespace tpgemm::testing
