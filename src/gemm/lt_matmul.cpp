#include "gemm/lt_matmul.h"

#include <utility>

#include "core/check.h"

namespace tpgemm::gemm {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kFP16: return CUDA_R_16F;
    case DType::kFP32: return CUDA_R_32F;
    case DType::kE4M3: return CUDA_R_8F_E4M3;
    case DType::kE5M2: return CUDA_R_8F_E5M2;
  }
  throw Error(ErrorCode::kUnsupported, strfmt("dtype %d: cuBLASLt has no such type", static_cast<int>(t)));
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  TPGEMM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t b = static_cast<int32_t>(batch);
    TPGEMM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof(b)));
    TPGEMM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

}  // namespace

MatmulShape packed_shape(int64_t m, int64_t n, int64_t k, int64_t batch, DType dtype, BLayout b_layout) {
  MatmulShape s;
  s.m = m;
  s.n = n;
  s.k = k;
  s.lda = k;
  s.ldb = b_layout == BLayout::kKN ? n : k;
  s.ldc = s.ldd = n;
  s.batch = batch;
  s.stride_a = m * k;
  s.stride_b = k * n;
  s.stride_c = s.stride_d = m * n;
  s.dtype = dtype;
  s.b_layout = b_layout;
  return s;
}

MatmulShape packed_shape(const GemmProblem& p, int64_t m, int64_t n) {
  MatmulShape s = packed_shape(m, n, p.k, p.l, p.dtype, p.b_layout);
  if (p.b_broadcast) s.stride_b = 0;  // one B for every batch entry
  s.b_dtype = p.b_dtype;
  s.out_dtype = p.out_dtype;
  s.scale_mode = p.scale_mode;
  return s;
}

// NOTE [row-major through cuBLASLt]
// cuBLASLt is column-major. A row-major D[m, n] is the column-major D^T[n, m], and
// D^T = op(B)^T * A^T. So cuBLASLt's "A" is our B and its "B" is our A:
//   our B as [K, N] row-major is column-major [N, K] with ld = ldb: already B^T, no transpose;
//   our B as [N, K] row-major is column-major [K, N]: transpose it (the "TN" GEMM cuBLAS likes);
//   our A [M, K] row-major is column-major [K, M] = A^T: no transpose;
//   our A stored as [K, M] row-major (a_transposed) is column-major [M, K]: transpose it.
LtMatmul::LtMatmul(cublasLtHandle_t handle, const MatmulShape& s) : handle_(handle), shape_(s) {
  try {
    TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = s.b_layout == BLayout::kNK ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = s.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    if (s.sm_count > 0) {
      const int32_t sms = s.sm_count;
      TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof(sms)));
    }
    const cudaDataType_t in = cuda_type(s.dtype), in_b = cuda_type(b_type(s)),
                         out = cuda_type(out_type(s));
    if (is_fp8(s.dtype)) {
      // cuBLASLt's heuristic offers kernels that apply operand scales only when the descriptor
      // carries scale pointers, and cublasLtMatmul refuses (NOT_SUPPORTED) an algorithm chosen
      // without them. The heuristic never reads the pointers: a placeholder stands in until run()
      // sets the caller's.
      const float* placeholder = reinterpret_cast<const float*>(uintptr_t{256});
      set_scales(placeholder, placeholder);
      if (s.scale_mode == ScaleMode::kRow) {  // vectors: cuBLASLt's A (our B) has its M (our N), its B our M
        const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
        TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
      } else if (s.scale_mode == ScaleMode::kBlock) {  // NOTE [block scales through cuBLASLt]
        const int32_t a_mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;  // cuBLASLt's A: our B, the weight
        const int32_t b_mode = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;      // cuBLASLt's B: our A
        TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &a_mode, sizeof(a_mode)));
        TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &b_mode, sizeof(b_mode)));
      }
    }
    a_ = s.b_layout == BLayout::kNK ? make_layout(in_b, s.k, s.n, s.ldb, s.batch, s.stride_b)
                                    : make_layout(in_b, s.n, s.k, s.ldb, s.batch, s.stride_b);
    b_ = s.a_transposed ? make_layout(in, s.m, s.k, s.lda, s.batch, s.stride_a)
                        : make_layout(in, s.k, s.m, s.lda, s.batch, s.stride_a);
    c_ = make_layout(out, s.n, s.m, s.has_c ? s.ldc : s.ldd, s.batch, s.has_c ? s.stride_c : s.stride_d);
    d_ = make_layout(out, s.n, s.m, s.ldd, s.batch, s.stride_d);

    algo_aligned_ = best_algo(256);
    algo_16b_ = best_algo(16);
    if (s.a_unaligned) algo_unaligned_ = best_algo(static_cast<uint32_t>(dtype_size(s.dtype)));
  } catch (...) {
    release();
    throw;
  }
}

cublasLtMatmulAlgo_t LtMatmul::best_algo(uint32_t alignment) const {
  const MatmulShape& s = shape_;
  cublasLtMatmulPreference_t pref = nullptr;
  TPGEMM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  for (const auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment));
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulAlgoGetHeuristic(handle_, op_, a_, b_, c_, d_, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0)
    throw Error(ErrorCode::kUnsupported,
                strfmt("cuBLASLt has no algorithm for D[%lld x %lld] = A[%lld x %lld] * B (%s x %s, B %s, batch %lld, "
                       "out %s, %u-byte aligned operands): status %d", (long long)s.m, (long long)s.n, (long long)s.m,
                       (long long)s.k, std::string(to_string(s.dtype)).c_str(),
                       std::string(to_string(b_type(s))).c_str(), std::string(to_string(s.b_layout)).c_str(),
                       (long long)s.batch, std::string(to_string(out_type(s))).c_str(), alignment, static_cast<int>(st)));
  return result.algo;
}

// Our A is cuBLASLt's B and our B its A (NOTE [row-major through cuBLASLt]). The pointers are read
// when the matmul is enqueued, so a CUDA graph captures them like the operands.
void LtMatmul::set_scales(const float* a_scale, const float* b_scale) const {
  TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale, sizeof(b_scale)));
  TPGEMM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof(a_scale)));
}

void LtMatmul::run(const void* a, const void* b, const void* c, void* d, float alpha, float beta, void* workspace,
                   cudaStream_t stream, const float* a_scale, const float* b_scale) const {
  if (is_fp8(shape_.dtype)) {
    if (a_scale == nullptr || b_scale == nullptr)
      throw Error(ErrorCode::kInvalidArgument, "an FP8 matmul needs a_scale and b_scale (device pointers to fp32 scales)");
    set_scales(a_scale, b_scale);
  }
  const float beta_used = shape_.has_c ? beta : 0.0f;
  const void* c_used = shape_.has_c ? c : d;
  const auto bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(c_used) |
                    reinterpret_cast<uintptr_t>(d);
  const cublasLtMatmulAlgo_t* algo = bits % 256 == 0                     ? &algo_aligned_
                                     : bits % 16 == 0 || !shape_.a_unaligned ? &algo_16b_
                                                                            : &algo_unaligned_;
  // Our B is cuBLASLt's A and our A its B (NOTE [row-major through cuBLASLt]).
  TPGEMM_CUBLAS_CHECK(cublasLtMatmul(handle_, op_, &alpha, b, a_, a, b_, &beta_used, c_used, c_, d, d_, algo,
                                     workspace, kWorkspaceBytes, stream));
}

void LtMatmul::release() noexcept {
  if (a_ != nullptr) cublasLtMatrixLayoutDestroy(a_);
  if (b_ != nullptr) cublasLtMatrixLayoutDestroy(b_);
  if (c_ != nullptr) cublasLtMatrixLayoutDestroy(c_);
  if (d_ != nullptr) cublasLtMatrixLayoutDestroy(d_);
  if (op_ != nullptr) cublasLtMatmulDescDestroy(op_);
  a_ = b_ = c_ = d_ = nullptr;
  op_ = nullptr;
}

LtMatmul::~LtMatmul() { release(); }

LtMatmul::LtMatmul(LtMatmul&& o) noexcept { *this = std::move(o); }

LtMatmul& LtMatmul::operator=(LtMatmul&& o) noexcept {
  if (this != &o) {
    release();
    handle_ = o.handle_;
    shape_ = o.shape_;
    op_ = std::exchange(o.op_, nullptr);
    a_ = std::exchange(o.a_, nullptr);
    b_ = std::exchange(o.b_, nullptr);
    c_ = std::exchange(o.c_, nullptr);
    d_ = std::exchange(o.d_, nullptr);
    algo_aligned_ = o.algo_aligned_;
    algo_16b_ = o.algo_16b_;
    algo_unaligned_ = o.algo_unaligned_;
  }
  return *this;
}

const LtMatmul& LtMatmulCache::get(const MatmulShape& shape) {
  for (auto it = plans_.rbegin(); it != plans_.rend(); ++it)
    if ((*it)->shape() == shape) return **it;
  // A plan's descriptors are read when a matmul is enqueued, not after: dropping one that work
  // already queued used is safe.
  if (plans_.size() >= kMaxPlans) plans_.erase(plans_.begin());
  plans_.push_back(std::make_unique<LtMatmul>(handle_, shape));
  return *plans_.back();
}

}  // namespace tpgemm::gemm
