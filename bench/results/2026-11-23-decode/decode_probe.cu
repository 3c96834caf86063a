// Experiment (not part of tpgemm): where the fused decode kernel's matmul loses its time, on one GPU.
// Builds against the tree: nvcc -I src -I include -I .carry/cutlass/include ... (see probe.sh).
//   probe_tiles<T, TILE_M, STAGES>: the production compute_tile, each tile copied out to D.
//   load_only<STAGES, BK>: the same cp.async pattern over B (64 rows x BK columns a stage), no math.
//   stream: each block reads its 64 rows of B (256 KB contiguous) with 16-byte loads, 8 in flight.
//   cuBLASLt's default algorithm on the same matmul, for reference and to check probe_tiles.
#include "ops/gemm_ar/fused_decode_kernel.cu"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x)                                                                            \
  do {                                                                                   \
    auto e_ = (x);                                                                       \
    if ((int)e_) {                                                                       \
      std::printf("error %d at %s:%d: %s\n", (int)e_, __FILE__, __LINE__, #x);           \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

namespace tpgemm::ops {
namespace {

template <typename T, int kTileM, int kStages>
__global__ void __launch_bounds__(128) probe_tiles(FusedDecodeArgs args, T* out, int rep) {
  // Block b reads copy b % rep of A (rep copies, back to back).
  args.a = static_cast<const T*>(args.a) + (blockIdx.x % rep) * args.m * args.k;
  using Tl = DecodeTile<T, kTileM, kStages>;
  using E = typename Tl::E;
  extern __shared__ char smem_raw[];
  E* sa = reinterpret_cast<E*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) / 1024 * 1024);
  E* sb = sa + cute::cosize_v<typename Tl::SmemA>;
  E* sd = sb + cute::cosize_v<typename Tl::SmemB>;
  auto sA = cute::make_tensor(cute::make_smem_ptr(sa), typename Tl::SmemA{});
  auto sB = cute::make_tensor(cute::make_smem_ptr(sb), typename Tl::SmemB{});
  auto sDt = cute::make_tensor(cute::make_smem_ptr(sd), typename Tl::SmemDt{});
  const int64_t m_tiles = args.m / kTileM, n_tiles = args.n / kDecodeTileN, tiles = m_tiles * n_tiles;
  const int64_t nv = args.n / 8;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t nt = t % n_tiles, mt = t / n_tiles;
    compute_tile<T, kTileM, kStages>(args, 0, mt, nt, sA, sB, sDt);
    constexpr int kRowVecs = kDecodeTileN / 8;
    for (int v = threadIdx.x; v < kTileM * kRowVecs; v += 128)
      reinterpret_cast<uint4*>(out)[(mt * kTileM + v / kRowVecs) * nv + nt * kRowVecs + v % kRowVecs] =
          reinterpret_cast<const uint4*>(sd)[v];
    __syncthreads();
  }
}

__device__ __forceinline__ void cp16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}

// B [N, K] row-major, one block per 64 rows: the loads of probe_tiles' ring, nothing else.
template <int kStages, int kBK>
__global__ void __launch_bounds__(128) load_only(const uint4* b, int64_t k, int* sink) {
  extern __shared__ uint4 s[];
  constexpr int kRowVecs = kBK / 8, kVecs = 64 * kRowVecs;
  const int64_t row_vecs = k / 8;
  const int k_tiles = static_cast<int>(k / kBK);
  const uint4* base = b + blockIdx.x * 64 * row_vecs;
  auto issue = [&](int kt, int stage) {
    for (int v = threadIdx.x; v < kVecs; v += 128)
      cp16(&s[stage * kVecs + v], base + (v / kRowVecs) * row_vecs + kt * kRowVecs + v % kRowVecs);
    asm volatile("cp.async.commit_group;\n" ::);
  };
  for (int p = 0; p < kStages - 1; ++p) issue(p, p);
  int acc = 0;
  for (int kt = 0; kt < k_tiles; ++kt) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
    __syncthreads();
    acc += s[(kt % kStages) * kVecs + threadIdx.x].x;
    const int next = kt + kStages - 1;
    if (next < k_tiles) issue(next, next % kStages);
    else asm volatile("cp.async.commit_group;\n" ::);
  }
  if (acc == 0x12345678) *sink = acc;
}

// Each block streams its 64 rows of B (contiguous), 8 independent 16-byte loads per thread in flight.
__global__ void __launch_bounds__(128) stream(const uint4* b, int64_t block_vecs, int* sink) {
  const uint4* p = b + blockIdx.x * block_vecs;
  unsigned acc = 0;
  for (int64_t i = threadIdx.x; i < block_vecs; i += 128 * 8) {
    uint4 x[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) x[j] = __ldcs(p + i + j * 128);
#pragma unroll
    for (int j = 0; j < 8; ++j) acc ^= x[j].x ^ x[j].w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void fill_random(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 13; x *= 0x5bd1e995u; x ^= x >> 15;
    p[i] = __float2bfloat16(static_cast<float>(x & 0xffff) / 65536.0f - 0.5f);
  }
}

template <class F>
float median_us(F launch, int reps = 20, int per = 20) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  for (int i = 0; i < 5; ++i) launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> ts;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(e0));
    for (int i = 0; i < per; ++i) launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    ts.push_back(ms * 1000.0f / per);
  }
  CK(cudaGetLastError());
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

template <int kTileM, int kStages = 5>
void run_probe(FusedDecodeArgs args, __nv_bfloat16* out, const __nv_bfloat16* ref, int sms, bool once, int rep = 1) {
  using Tl = DecodeTile<__nv_bfloat16, kTileM, kStages>;
  const void* fn = reinterpret_cast<const void*>(probe_tiles<__nv_bfloat16, kTileM, kStages>);
  const int smem = Tl::kSmemBytes;
  CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, 128, smem));
  const int64_t tiles = (args.m / kTileM) * (args.n / kDecodeTileN);
  const int blocks = static_cast<int>(std::min<int64_t>(tiles, int64_t(per_sm) * sms));
  auto launch = [&] {
    probe_tiles<__nv_bfloat16, kTileM, kStages><<<blocks, 128, smem>>>(args, out, rep);
  };
  if (once) { launch(); CK(cudaDeviceSynchronize()); return; }
  CK(cudaMemset(out, 0xff, args.m * args.n * 2));  // poison
  launch();
  CK(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> h(args.m * args.n), r(args.m * args.n);
  CK(cudaMemcpy(h.data(), out, h.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.data(), ref, r.size() * 2, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    const double d = std::abs(double(__bfloat162float(h[i])) - double(__bfloat162float(r[i])));
    worst = std::max(worst, d != d ? 1e30 : d);
  }
  const float us = median_us(launch);
  const double gbs = double(args.n) * args.k * 2 * (args.m / kTileM) / (us * 1e3);
  std::printf("probe_tiles rep=%-2d M=%-4ld tile_m=%-3d stages=%-2d blocks=%-4d per_sm=%d smem=%6d  %7.1f us  B read %6.0f GB/s  max|d-ref|=%.3g %s\n",
              rep, (long)args.m, kTileM, kStages, blocks, per_sm, smem, us, gbs, worst, worst < 0.13 ? "ok" : "WRONG");
}

template <int kStages, int kBK>
void run_load(const __nv_bfloat16* b, int64_t n, int64_t k, int* sink, bool once) {
  const int smem = kStages * 64 * kBK * 2;
  CK(cudaFuncSetAttribute(load_only<kStages, kBK>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  auto launch = [&] { load_only<kStages, kBK><<<n / 64, 128, smem>>>(reinterpret_cast<const uint4*>(b), k, sink); };
  if (once) { launch(); CK(cudaDeviceSynchronize()); return; }
  const float us = median_us(launch);
  std::printf("load_only stages=%d bk=%-3d blocks=%ld smem=%6d  %7.1f us  %6.0f GB/s\n", kStages, kBK, (long)(n / 64), smem,
              us, double(n) * k * 2 / (us * 1e3));
}

}  // namespace
}  // namespace tpgemm::ops

using namespace tpgemm::ops;

int main(int argc, char** argv) {
  const bool ncu = argc > 1 && !std::strcmp(argv[1], "--ncu");  // each kernel once, for the profiler
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t n = 8192, k = 2048, max_m = 256;
  __nv_bfloat16 *a, *b, *d, *ref;
  int* sink;
  void* ws;
  const size_t wsb = 32 << 20;
  CK(cudaMalloc(&a, 32 * max_m * k * 2));
  CK(cudaMalloc(&b, n * k * 2));
  CK(cudaMalloc(&d, max_m * n * 2));
  CK(cudaMalloc(&ref, max_m * n * 2));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&ws, wsb));
  fill_random<<<1024, 256>>>(a, max_m * k, 1u);
  CK(cudaDeviceSynchronize());
  fill_random<<<1024, 256>>>(b, n * k, 2u);
  CK(cudaDeviceSynchronize());
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  for (int64_t m : {16, 32, 64, 128, 256}) {
    fill_random<<<1024, 256>>>(a, max_m * k, 1u);
    for (int r = 1; r < 32; ++r) CK(cudaMemcpy(a + r * m * k, a, m * k * 2, cudaMemcpyDeviceToDevice));
    CK(cudaDeviceSynchronize());
    // Row-major D[m,n] = A[m,k] B[n,k]^T  ==  column-major D^T[n,m] = B^T... (as tools' cuBLASLt path)
    cublasLtMatmulDesc_t op;
    CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
    cublasLtMatrixLayout_t la, lb, ld;
    CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, n, k));
    CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, m, k));
    CK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, m, n));
    cublasLtMatmulPreference_t pref;
    CK(cublasLtMatmulPreferenceCreate(&pref));
    CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb)));
    cublasLtMatmulHeuristicResult_t res[1];
    int found = 0;
    CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, res, &found));
    float alpha = 1, beta = 0;
    auto lt = [&] { CK(cublasLtMatmul(h, op, &alpha, b, la, a, lb, &beta, ref, ld, ref, ld, &res[0].algo, ws, wsb, 0)); };
    lt();
    CK(cudaDeviceSynchronize());
    if (!ncu) {
      const float us = median_us(lt);
      std::printf("cublasLt    M=%-4ld %7.1f us  B read %6.0f GB/s\n", (long)m, us, double(n) * k * 2 / (us * 1e3));
    }
    FusedDecodeArgs args;
    args.a = a;
    args.b = b;
    args.m = m;
    args.n = n;
    args.k = k;
    run_probe<16>(args, d, ref, sms, ncu);
    if (m % 32 == 0) run_probe<32>(args, d, ref, sms, ncu);
    if (m % 64 == 0) run_probe<64>(args, d, ref, sms, ncu);
    if (m % 128 == 0) run_probe<128>(args, d, ref, sms, ncu);
  }
  run_load<4, 64>(b, n, k, sink, ncu);
  if (!ncu) {
    run_load<2, 64>(b, n, k, sink, false);
    run_load<8, 64>(b, n, k, sink, false);
    run_load<12, 64>(b, n, k, sink, false);
    run_load<4, 128>(b, n, k, sink, false);
    run_load<6, 128>(b, n, k, sink, false);
    run_load<4, 256>(b, n, k, sink, false);
  }
  auto st = [&] { stream<<<n / 64, 128>>>(reinterpret_cast<const uint4*>(b), 64 * k / 8, sink); };
  if (ncu) { st(); CK(cudaDeviceSynchronize()); }
  else {
    const float us = median_us(st);
    std::printf("stream (64 rows/block, 8 x 16 B in flight/thread)  %7.1f us  %6.0f GB/s\n", us, double(n) * k * 2 / (us * 1e3));
  }
  std::printf("done\n");
  return 0;
}
