#include "testing/problem_data.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "core/check.h"
#include "ops/common/copy_batched.h"
#include "plan/problem.h"

namespace tpgemm::testing {
namespace {
// Distinct streams of random numbers per operand (NOTE [reproducible problem data]).
uint64_t seed_of(uint64_t seed, int role, int rank) { return seed * 1000003ull + static_cast<uint64_t>(role) * 4099ull + rank; }
enum Role { kA = 1, kB = 2, kC = 3 };
size_t bytes_of(int64_t count, DType t) { return static_cast<size_t>(count) * dtype_size(t); }
}  // namespace

bool gathers_a(const GemmProblem& p) { return p.op == Op::kAgGemm && p.shard_dim == ShardDim::kM; }

float a_scale_of(const GemmProblem& p, int rank, uint64_t seed) {
  return is_fp8(p.dtype) && p.scale_mode == ScaleMode::kTensor ? 0.25f * static_cast<float>(1 + (seed + static_cast<uint64_t>(rank)) % 4) : 1.0f;
}

float b_scale_of(const GemmProblem& p, int rank, uint64_t seed) {
  return is_fp8(p.dtype) && p.scale_mode == ScaleMode::kTensor ? 0.5f * static_cast<float>(1 + (seed + 2 * static_cast<uint64_t>(rank)) % 3) : 1.0f;
}

float a_row_scale_of(int rank, int64_t row, uint64_t seed) {
  return 0.25f * static_cast<float>(1 + (seed + 3 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(row)) % 4);
}

float b_col_scale_of(int rank, int64_t col, uint64_t seed) {
  // (period 5: no block of columns a test takes is a multiple of it, so a block's offset shows)
  return 0.5f * static_cast<float>(1 + (seed + 2 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(col)) % 5);
}

float a_block_scale_of(int rank, int64_t row, int64_t kb, uint64_t seed) {
  return 0.25f * static_cast<float>(1 + (seed + 3 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(row) +
                                         2 * static_cast<uint64_t>(kb)) % 4);
}

float b_block_scale_of(int rank, int64_t nb, int64_t kb, uint64_t seed) {
  return 0.5f * static_cast<float>(1 + (seed + 2 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(nb) +
                                        3 * static_cast<uint64_t>(kb)) % 5);
}

namespace {
// `count` values f(i) on the GPU (synchronised: the host copy dies here).
template <typename F>
DeviceBuffer device_values(int64_t count, F f, cudaStream_t stream) {
  std::vector<float> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = f(i);
  DeviceBuffer out(v.size() * sizeof(float));
  TPGEMM_CUDA_CHECK(cudaMemcpyAsync(out.get(), v.data(), out.bytes(), cudaMemcpyHostToDevice, stream));
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}
// Block e4m3 (ScaleMode::kBlock): rank q's scales of its A of `rows` rows and of its B of `cols`
// rows ([cols, K]), laid out as types.h says (the reference reads none of the stride's padding).
DeviceBuffer a_blocks_of(const GemmProblem& p, int q, int64_t rows, uint64_t seed, cudaStream_t stream) {
  return device_values(scale_k_blocks(p) * rows, [&](int64_t e) { return a_block_scale_of(q, e % rows, e / rows, seed); },
                       stream);
}
DeviceBuffer b_blocks_of(const GemmProblem& p, int q, int64_t cols, uint64_t seed, cudaStream_t stream) {
  const int64_t kb = scale_k_blocks(p), ld = b_scale_ld(p);
  return device_values((cols + kScaleBlock - 1) / kScaleBlock * ld, [&](int64_t e) {
    return e % ld < kb ? b_block_scale_of(q, e / ld, e % ld, seed) : 0.0f;
  }, stream);
}
}  // namespace

void fill_a(void* a, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream) {
  if (gathers_a(p))
    fill_random(a, p.dtype, p.l, p.m / world, p.k, rank * (p.m / world), p.m, seed_of(seed, kA, 0), stream);
  else
    fill_random(a, p.dtype, p.l, p.m, p.k, 0, p.m, seed_of(seed, kA, rank), stream);
}

void fill_gathered_a(void* a, const GemmProblem& p, uint64_t seed, cudaStream_t stream) {
  TPGEMM_ASSERT(gathers_a(p));
  fill_random(a, p.dtype, p.l, p.m, p.k, 0, p.m, seed_of(seed, kA, 0), stream);  // (fill_a's rows, all of them)
}

void fill_b(void* b, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream, bool every_batch) {
  // (along N, ag_gemm's B is this rank's own block of columns)
  const int64_t rows = plan::b_stored_rows(p, world), cols = plan::b_stored_row(p, world);
  fill_random(b, b_dtype(p), p.b_broadcast ? 1 : p.l, rows, cols, 0, rows, seed_of(seed, kB, rank), stream);
  if (!p.b_broadcast || !every_batch) return;
  const size_t bytes = bytes_of(rows * cols, b_dtype(p));  // the one B, copied into every batch entry
  for (int64_t e = 1; e < p.l; ++e)
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(b) + e * bytes, b, bytes, cudaMemcpyDeviceToDevice, stream));
}

void fill_c(void* c, const GemmProblem& p, int world, int rank, uint64_t seed, cudaStream_t stream) {
  const int64_t rows = plan::d_rows(p, world), cols = plan::d_cols(p, world);
  fill_random(c, d_dtype(p), p.l, rows, cols, 0, rows, seed_of(seed, kC, rank), stream);
}

RankData::RankData(const GemmProblem& problem, int w, int r, uint64_t seed, cudaStream_t stream)
    : p(problem), world(w), rank(r) {
  const OperandSizes s = operand_sizes(p, world);
  a = DeviceBuffer(bytes_of(s.a, p.dtype));
  b = DeviceBuffer(bytes_of(s.b, b_dtype(p)));
  c = DeviceBuffer(bytes_of(s.c, d_dtype(p)));
  d = DeviceBuffer(bytes_of(s.d, d_dtype(p)));
  if (is_fp8(p.dtype)) {
    b_scale_offset = (s.a_scale + kScaleSlot - 1) / kScaleSlot * kScaleSlot;
    scales = DeviceBuffer(static_cast<size_t>(b_scale_offset + s.b_scale) * sizeof(float));
  }
  refill(seed, stream);
}

namespace {
// `entries` packed [rows, row] matrices into `dst` as the problem stores them: rows `ld` apart,
// entries `batch` apart, or each transposed (rows of [row, rows], `ld` apart); what lies between
// rows and entries is poison, so that an implementation that reads it fails the check.
struct Stored {
  int64_t rows, row, ld, batch, entries;
  bool transpose;
};
void place(void* dst, int64_t span, const void* packed, const Stored& s, DType dt, cudaStream_t stream) {
  poison(dst, span, dt, stream);
  const int64_t es = static_cast<int64_t>(dtype_size(dt));
  if (!s.transpose) {
    ops::copy_matrices(dst, s.ld * es, s.batch * es, packed, s.row * es, s.rows * s.row * es, s.row * es, s.rows,
                       s.entries, stream);
    return;
  }
  for (int64_t b = 0; b < s.entries; ++b)
    transpose_into(static_cast<char*>(dst) + b * s.batch * es, s.ld,
                   static_cast<const char*>(packed) + b * s.rows * s.row * es, s.rows, s.row, dt, stream);
}
}  // namespace

void RankData::refill(uint64_t seed, cudaStream_t stream) {
  const OperandSizes sizes = operand_sizes(p, world);
  if (plan::packed_operands(p, world)) {
    fill_a(a.get(), p, world, rank, seed, stream);
    fill_b(b.get(), p, world, rank, seed, stream);
  } else {  // the same values as packed, stored as the problem says
    const int64_t ar = plan::a_rows(p, world), bc = plan::b_cols(p, world);
    const int64_t b_entries = p.b_broadcast ? 1 : p.l;
    DeviceBuffer packed(bytes_of(std::max(p.l * ar * p.k, b_entries * bc * p.k), p.dtype));
    fill_a(packed.get(), p, world, rank, seed, stream);
    place(a.get(), sizes.a, packed.get(),
          {ar, p.k, plan::a_ld(p, world), plan::a_batch_stride(p, world), p.l, p.a_layout == ALayout::kKM}, p.dtype,
          stream);
    fill_b(packed.get(), p, world, rank, seed, stream);
    place(b.get(), sizes.b, packed.get(),
          {plan::b_stored_rows(p, world), plan::b_stored_row(p, world), plan::b_ld(p, world),
           plan::b_batch_stride(p, world), b_entries, false},
          b_dtype(p), stream);
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (packed dies here)
  }
  const int64_t rows = plan::d_rows(p, world), cols = plan::d_cols(p, world);
  if (p.has_c && plan::c_ld(p, world) == cols && (p.l == 1 || plan::c_batch_stride(p, world) == rows * cols)) {
    fill_c(c.get(), p, world, rank, seed, stream);
  } else if (p.has_c) {  // the same values as packed, rows ldc apart, entries batch_stride_c
    DeviceBuffer packed(bytes_of(p.l * rows * cols, d_dtype(p)));
    fill_c(packed.get(), p, world, rank, seed, stream);
    place(c.get(), sizes.c, packed.get(), {rows, cols, plan::c_ld(p, world), plan::c_batch_stride(p, world), p.l, false},
          d_dtype(p), stream);
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (packed dies here)
  }
  if (is_fp8(p.dtype)) {
    const OperandSizes n = operand_sizes(p, world);
    const bool row = p.scale_mode == ScaleMode::kRow, block = p.scale_mode == ScaleMode::kBlock;
    std::vector<float> s(static_cast<size_t>(b_scale_offset + n.b_scale), 0.0f);
    const int64_t rows = plan::a_rows(p, world), kb = scale_k_blocks(p), ld = b_scale_ld(p);
    for (int64_t i = 0; i < n.a_scale; ++i)
      s[static_cast<size_t>(i)] = block ? a_block_scale_of(rank, i % rows, i / rows, seed)
                                  : row ? a_row_scale_of(rank, i, seed)
                                        : a_scale_of(p, rank, seed);
    for (int64_t j = 0; j < n.b_scale; ++j)
      s[static_cast<size_t>(b_scale_offset + j)] =
          block ? (j % ld < kb ? b_block_scale_of(rank, j / ld, j % ld, seed) : std::numeric_limits<float>::quiet_NaN())
          : row ? b_col_scale_of(rank, j, seed)
                : b_scale_of(p, rank, seed);
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(scales.get(), s.data(), s.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (s is on this stack)
  }
}

Operands RankData::operands() const {
  Operands o{a.get(), b.get(), c.get(), d.get()};
  if (is_fp8(p.dtype)) o.a_scale = scales.as<float>(), o.b_scale = scales.as<float>() + b_scale_offset;
  return o;
}

DeviceBuffer expected_d(const GemmProblem& p, int world, int rank, uint64_t seed, RefEngine engine, cublasLtHandle_t lt,
                        cudaStream_t stream) {
  DeviceBuffer full(static_cast<size_t>(p.l * p.m * p.n) * sizeof(float));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(full.get(), 0, full.bytes(), stream));
  DeviceBuffer a(bytes_of(p.l * p.m * p.k, p.dtype)), b(bytes_of(p.l * p.k * p.n, b_dtype(p)));
  const bool along_n = p.shard_dim == ShardDim::kN;
  const bool blk = is_fp8(p.dtype) && p.scale_mode == ScaleMode::kBlock;
  if (gathers_a(p)) {
    // The gathered A is the global matrix: generate it whole. e4m3: each rank's rows carry that
    // rank's scale.
    fill_random(a.get(), p.dtype, p.l, p.m, p.k, 0, p.m, seed_of(seed, kA, 0), stream);
    fill_b(b.get(), p, world, rank, seed, stream, /*every_batch=*/true);
    const bool row = is_fp8(p.dtype) && p.scale_mode == ScaleMode::kRow;
    if (blk) {  // the gathered A's scales, each row its rank's
      const int64_t mw = p.m / world;
      const DeviceBuffer as = device_values(scale_k_blocks(p) * p.m, [&](int64_t e) {
        const int64_t i = e % p.m;
        return a_block_scale_of(static_cast<int>(i / mw), i % mw, e / p.m, seed);
      }, stream);
      const DeviceBuffer bs = b_blocks_of(p, rank, p.n, seed, stream);
      reference_gemm_blocks(a.get(), b.get(), full.as<float>(), p.m, p.n, p.k, p.alpha, as.as<float>(), bs.as<float>(),
                            b_scale_ld(p), engine, lt, stream);
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (the scales die here)
    } else if (is_fp8(p.dtype) && !row && engine == RefEngine::kCublasLt && p.l == 1) {
      // Benchmark shapes: one cuBLASLt matmul per rank's rows (contiguous with one batch entry),
      // each with that rank's scale, instead of the naive kernel's per-row scale.
      const int64_t mw = p.m / world;
      for (int q = 0; q < world; ++q)
        reference_gemm(a.as<char>() + q * mw * p.k * static_cast<int64_t>(dtype_size(p.dtype)), b.get(), nullptr,
                       full.as<float>() + q * mw * p.n, mw, p.n, p.k, 1, p.dtype, p.b_layout,
                       p.alpha * a_scale_of(p, q, seed) * b_scale_of(p, rank, seed), 0.0f, engine, lt, stream, nullptr,
                       nullptr, b_dtype(p));
    } else {
      // e4m3: row i of the gathered A carries its rank's scale (row-wise: its own), and row-wise
      // every column of D its B's.
      const int64_t mw = p.m / world;
      DeviceBuffer row_scale, col_scale;
      if (is_fp8(p.dtype))
        row_scale = device_values(p.m, [&](int64_t i) {
          const int q = static_cast<int>(i / mw);
          return row ? a_row_scale_of(q, i % mw, seed) : a_scale_of(p, q, seed);
        }, stream);
      if (row) col_scale = device_values(p.n, [&](int64_t j) { return b_col_scale_of(rank, j, seed); }, stream);
      reference_gemm(a.get(), b.get(), nullptr, full.as<float>(), p.m, p.n, p.k, p.l, p.dtype, p.b_layout,
                     p.alpha * b_scale_of(p, rank, seed), 0.0f, engine, lt, stream, row_scale.as<float>(),
                     col_scale.as<float>(), b_dtype(p));
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (the scales die here)
    }
  } else if (p.op == Op::kAgGemm) {
    // Along N: my A times every rank's block of B's columns, each placed at its columns of D.
    const int64_t nw = p.n / world;
    const bool row = is_fp8(p.dtype) && p.scale_mode == ScaleMode::kRow;
    DeviceBuffer block(static_cast<size_t>(p.l * p.m * nw) * sizeof(float));
    DeviceBuffer row_scale;  // row-wise e4m3: my A's rows; block: my A's scales
    if (row) row_scale = device_values(p.m, [&](int64_t i) { return a_row_scale_of(rank, i, seed); }, stream);
    if (blk) row_scale = a_blocks_of(p, rank, p.m, seed, stream);
    fill_a(a.get(), p, world, rank, seed, stream);
    for (int q = 0; q < world; ++q) {
      fill_b(b.get(), p, world, q, seed, stream, /*every_batch=*/true);
      TPGEMM_CUDA_CHECK(cudaMemsetAsync(block.get(), 0, block.bytes(), stream));
      DeviceBuffer col_scale;  // row-wise e4m3: rank q's block of columns; block: its B's scales
      if (row) col_scale = device_values(nw, [&](int64_t j) { return b_col_scale_of(q, j, seed); }, stream);
      if (blk) col_scale = b_blocks_of(p, q, nw, seed, stream);
      if (blk)
        reference_gemm_blocks(a.get(), b.get(), block.as<float>(), p.m, nw, p.k, p.alpha, row_scale.as<float>(),
                              col_scale.as<float>(), b_scale_ld(p), engine, lt, stream);
      else
        reference_gemm(a.get(), b.get(), nullptr, block.as<float>(), p.m, nw, p.k, p.l, p.dtype, p.b_layout,
                       p.alpha * a_scale_of(p, rank, seed) * b_scale_of(p, q, seed), 0.0f, engine, lt, stream,
                       row_scale.as<float>(), col_scale.as<float>(), b_dtype(p));
      TPGEMM_CUDA_CHECK(cudaMemcpy2DAsync(full.as<float>() + q * nw, p.n * sizeof(float), block.get(), nw * sizeof(float),
                                          nw * sizeof(float), p.l * p.m, cudaMemcpyDeviceToDevice, stream));
      if (row || blk) TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (col_scale dies here)
    }
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (row_scale dies here)
  } else {
    const bool row = is_fp8(p.dtype) && p.scale_mode == ScaleMode::kRow;
    for (int q = 0; q < world; ++q) {
      fill_a(a.get(), p, world, q, seed, stream);
      fill_b(b.get(), p, world, q, seed, stream, /*every_batch=*/true);
      DeviceBuffer row_scale, col_scale;  // row-wise e4m3: rank q's
      if (row) {
        row_scale = device_values(p.m, [&](int64_t i) { return a_row_scale_of(q, i, seed); }, stream);
        col_scale = device_values(p.n, [&](int64_t j) { return b_col_scale_of(q, j, seed); }, stream);
      }
      if (blk) {  // rank q's A and B with their block scales
        const DeviceBuffer as = a_blocks_of(p, q, p.m, seed, stream), bs = b_blocks_of(p, q, p.n, seed, stream);
        reference_gemm_blocks(a.get(), b.get(), full.as<float>(), p.m, p.n, p.k, p.alpha, as.as<float>(), bs.as<float>(),
                              b_scale_ld(p), engine, lt, stream);
        TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (the scales die here)
        continue;
      }
      reference_gemm(a.get(), b.get(), nullptr, full.as<float>(), p.m, p.n, p.k, p.l, p.dtype, p.b_layout,
                     p.alpha * a_scale_of(p, q, seed) * b_scale_of(p, q, seed), 0.0f, engine, lt, stream,
                     row_scale.as<float>(), col_scale.as<float>(), b_dtype(p));
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // (the scales die here)
    }
  }
  DeviceBuffer mine = std::move(full);
  const int64_t rows = plan::d_rows(p, world), cols = plan::d_cols(p, world);
  if (p.op == Op::kGemmRs) {  // keep my block of every batch entry: rows along M, columns along N
    DeviceBuffer part(static_cast<size_t>(p.l * rows * cols) * sizeof(float));
    if (along_n)
      TPGEMM_CUDA_CHECK(cudaMemcpy2DAsync(part.get(), cols * sizeof(float), mine.as<float>() + rank * cols,
                                          p.n * sizeof(float), cols * sizeof(float), p.l * p.m, cudaMemcpyDeviceToDevice,
                                          stream));
    else
      TPGEMM_CUDA_CHECK(cudaMemcpy2DAsync(part.get(), rows * p.n * sizeof(float), mine.as<float>() + rank * rows * p.n,
                                          p.m * p.n * sizeof(float), rows * p.n * sizeof(float), p.l,
                                          cudaMemcpyDeviceToDevice, stream));
    mine = std::move(part);
  }
  if (p.has_c && p.beta != 0.0f) {
    DeviceBuffer c(bytes_of(p.l * rows * cols, d_dtype(p)));
    fill_c(c.get(), p, world, rank, seed, stream);
    reference_add(mine.as<float>(), c.get(), p.beta, p.l * rows * cols, d_dtype(p), stream);
  }
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the temporaries die here
  return mine;
}

Diff compare_d(const void* d, const DeviceBuffer& expected, const GemmProblem& p, int world, cudaStream_t stream) {
  const int64_t ld = plan::d_ld(p, world), cols = plan::d_cols(p, world), rows = plan::d_rows(p, world);
  const int64_t batch = plan::d_batch_stride(p, world), es = static_cast<int64_t>(dtype_size(d_dtype(p)));
  if (ld == cols && (p.l == 1 || batch == rows * cols)) {
    const int64_t n = operand_sizes(p, world).d;
    return compare(d, d_dtype(p), expected.as<float>(), 1, n, n, n, 0, stream);
  }
  // D's rows packed into a copy and compared; what lies between its rows and its entries must
  // still be poison (NaN): a finite value there was written by the call.
  DeviceBuffer packed(bytes_of(p.l * rows * cols, d_dtype(p)));
  ops::copy_matrices(packed.get(), cols * es, rows * cols * es, d, ld * es, batch * es, cols * es, rows, p.l, stream);
  Diff diff = compare(packed.get(), d_dtype(p), expected.as<float>(), 1, p.l * rows * cols, 0, 0, 0, stream);
  const int64_t entry = (rows - 1) * ld + cols, row_gap = ld - cols, entry_gap = p.l > 1 ? batch - entry : 0;
  DeviceBuffer zeros(static_cast<size_t>(std::max<int64_t>({row_gap, entry_gap, 1})) * sizeof(float));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(zeros.get(), 0, zeros.bytes(), stream));
  const char* dp = static_cast<const char*>(d);
  int64_t between = 0, poison_left = 0;
  if (row_gap > 0 && rows > 1)
    for (int64_t b = 0; b < p.l; ++b) {
      const Diff g = compare(dp + (b * batch + cols) * es, d_dtype(p), zeros.as<float>(), rows - 1, row_gap, ld, 0, 0,
                             stream);
      between += (rows - 1) * row_gap, poison_left += g.nonfinite;
    }
  if (entry_gap > 0) {
    const Diff g = compare(dp + entry * es, d_dtype(p), zeros.as<float>(), p.l - 1, entry_gap, batch, 0, 0, stream);
    between += (p.l - 1) * entry_gap, poison_left += g.nonfinite;
  }
  diff.written_outside = between - poison_left;
  return diff;
}

}  // namespace tpgemm::testing
