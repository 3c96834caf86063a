#include "testing/problem_data.h"

#include "core/check.h"

namespace tpgemm::testing {
namespace {
// Distinct streams of random numbers per operand (NOTE [reproducible problem data]).
uint64_t seed_of(uint64_t seed, int role, int rank) { return seed * 1000003ull + static_cast<uint64_t>(role) * 4099ull + rank; }
enum Role { kA = 1, kB = 2, kC = 3 };
size_t bytes_of(int64_t count, DType t) { return static_cast<size_t>(count) * dtype_size(t); }
}  // namespace

void fill_a(void* a, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream) {
  if (p.op == Op::kAgGemm)
    fill_random(a, p.dtype, p.l, p.m / world, p.k, rank * (p.m / world), p.m, seed_of(seed, kA, 0), stream);
  else
    fill_random(a, p.dtype, p.l, p.m, p.k, 0, p.m, seed_of(seed, kA, rank), stream);
}

void fill_b(void* b, const GemmProblem& p, int rank, uint64_t seed, cudaStream_t stream) {
  const int64_t rows = p.b_layout == BLayout::kKN ? p.k : p.n, cols = p.b_layout == BLayout::kKN ? p.n : p.k;
  fill_random(b, p.dtype, p.l, rows, cols, 0, rows, seed_of(seed, kB, rank), stream);
}

void fill_c(void* c, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream) {
  const int64_t rows = p.op == Op::kGemmRs ? p.m / world : p.m;
  fill_random(c, p.dtype, p.l, rows, p.n, 0, rows, seed_of(seed, kC, rank), stream);
}

RankData::RankData(const GemmProblem& problem, int w, int r, uint64_t seed, cudaStream_t stream)
    : p(problem), world(w), rank(r) {
  const OperandSizes s = operand_sizes(p, world);
  a = DeviceBuffer(bytes_of(s.a, p.dtype));
  b = DeviceBuffer(bytes_of(s.b, p.dtype));
  c = DeviceBuffer(bytes_of(s.c, p.dtype));
  d = DeviceBuffer(bytes_of(s.d, p.dtype));
  refill(seed, stream);
}

void RankData::refill(uint64_t seed, cudaStream_t stream) {
  fill_a(a.get(), p, world, rank, seed, stream);
  fill_b(b.get(), p, rank, seed, stream);
  if (p.has_c) fill_c(c.get(), p, world, rank, seed, stream);
}

DeviceBuffer expected_d(const GemmProblem& p, int world, int rank, uint64_t seed, RefEngine engine, cublasLtHandle_t lt,
                        cudaStream_t stream) {
  DeviceBuffer full(static_cast<size_t>(p.l * p.m * p.n) * sizeof(float));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(full.get(), 0, full.bytes(), stream));
  DeviceBuffer a(bytes_of(p.l * p.m * p.k, p.dtype)), b(bytes_of(p.l * p.k * p.n, p.dtype));
  if (p.op == Op::kAgGemm) {
    // The gathered A is the global matrix: generate it whole.
    fill_random(a.get(), p.dtype, p.l, p.m, p.k, 0, p.m, seed_of(seed, kA, 0), stream);
    fill_b(b.get(), p, rank, seed, stream);
    reference_gemm(a.get(), b.get(), nullptr, full.as<float>(), p.m, p.n, p.k, p.l, p.dtype, p.b_layout, p.alpha, 0.0f,
                   engine, lt, stream);
  } else {
    for (int q = 0; q < world; ++q) {
      fill_a(a.get(), p, world, q, seed, stream);
      fill_b(b.get(), p, q, seed, stream);
      reference_gemm(a.get(), b.get(), nullptr, full.as<float>(), p.m, p.n, p.k, p.l, p.dtype, p.b_layout, p.alpha, 0.0f,
                     engine, lt, stream);
    }
  }
  DeviceBuffer mine = std::move(full);
  const int64_t rows = p.op == Op::kGemmRs ? p.m / world : p.m;
  if (p.op == Op::kGemmRs) {  // keep my row block of every batch entry
    DeviceBuffer part(static_cast<size_t>(p.l * rows * p.n) * sizeof(float));
    TPGEMM_CUDA_CHECK(cudaMemcpy2DAsync(part.get(), rows * p.n * sizeof(float), mine.as<float>() + rank * rows * p.n,
                                        p.m * p.n * sizeof(float), rows * p.n * sizeof(float), p.l, cudaMemcpyDeviceToDevice,
                                        stream));
    mine = std::move(part);
  }
  if (p.has_c && p.beta != 0.0f) {
    DeviceBuffer c(bytes_of(p.l * rows * p.n, p.dtype));
    fill_c(c.get(), p, world, rank, seed, stream);
    reference_add(mine.as<float>(), c.get(), p.beta, p.l * rows * p.n, p.dtype, stream);
  }
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the temporaries die here
  return mine;
}

Diff compare_d(const void* d, const DeviceBuffer& expected, const GemmProblem& p, int world, cudaStream_t stream) {
  const int64_t n = operand_sizes(p, world).d;
  return compare(d, p.dtype, expected.as<float>(), 1, n, n, n, 0, stream);
}

}  // namespace tpgemm::testing
