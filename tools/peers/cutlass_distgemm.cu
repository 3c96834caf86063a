// tpgemm-cutlass-distgemm: times CUTLASS's Distributed GEMM (its experimental
// cutlass/experimental/distributed API, Hopper, one process driving W GPUs), the peer tpgemm's
// AllGather+GEMM means to beat, on the `ag` lines of a shapes file, in the same device call as
// tpgemm-bench and with its method: each run between two events per GPU, synchronised, the
// slowest GPU's time, the median over the runs. One host thread launches the W GPUs in turn, and
// CUTLASS's first kernel waits for every GPU's launch. A timed run starts at a gate (a kernel
// spinning on a host flag) on every GPU, so that the W start events fire together; as in CUTLASS's
// example 65, the host opens the gates before it launches any DistGEMM graph: no graph is ever
// enqueued behind a kernel that only the host can end (a launch that waits there would hold each
// gate to its 10 s bound). The first GPU's time then holds the others' graph launches, a few us
// each. A run that has not ended after kRunLimitS is reported and the process exits.
//
// Schedule AllGather1D_TilingCD_RotatingA: A sharded by rows and passed around the ring, B and D
// sharded by columns. So tpgemm's per-rank M x N x K at W (every rank multiplies M global rows by
// its own N columns) is CUTLASS's global problem M x (N W) x K. Kernel: cooperative 128x256x64,
// cluster 1x2, bf16 in and out, fp32 accumulation: the configuration of its published figures (the
// example's own pingpong configuration spills registers with fp32 accumulators).
//
// Check, then time: first on operands that are small multiples of 1/16, a pure function of their
// global coordinates, so every fp32 dot product is exact whatever the order: 512 sampled elements
// of every GPU's D must equal their host-computed value rounded to bf16, bit for bit. Then A and B
// are refilled with tpgemm-bench's data (testing::fill_random: uniform in [-1, 1), every bit of a
// bf16 mantissa used), D poisoned, one run checked again on 128 sampled elements per GPU against
// a double dot product, and only that data is timed: a tensor core multiplying low-entropy values
// draws less power and clocks higher, so timing the exact operands would flatter this peer.
//
//   tpgemm-cutlass-distgemm [--gpus W] [--shapes FILE] [--iterations 40] [--warmup-iterations 10] [--json FILE]
#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/experimental/distributed/device/dist_gemm_universal_wrapper.hpp>
#include <cutlass/experimental/distributed/kernel/dist_gemm_kernel_wrapper.hpp>
#include <cutlass/experimental/distributed/schedules/dist_gemm_1d_schedules.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/shapes.h"
#include "default_shapes.h"
#include "testing/testing.h"

namespace tpgemm::peers {

using namespace cute;
using T = cutlass::bfloat16_t;

#define CK(x)                                                                                              \
  do {                                                                                                     \
    const cudaError_t e_ = (x);                                                                            \
    if (e_ != cudaSuccess) throw std::runtime_error(std::string(#x) + ": " + cudaGetErrorString(e_));      \
  } while (0)
#define CK_CUTLASS(x)                                                                                      \
  do {                                                                                                     \
    const cutlass::Status s_ = (x);                                                                        \
    if (s_ != cutlass::Status::kSuccess) throw std::runtime_error(std::string(#x) + ": " + cutlassGetStatusString(s_)); \
  } while (0)

// The value of operand `which` (0: A [M, K], 1: B [N, K]) at global (row, col): a multiple of 1/16
// in [-2, 2), exact in bf16.
__host__ __device__ inline float operand_value(int which, int64_t row, int64_t col) {
  uint64_t h = (static_cast<uint64_t>(which) << 62) ^ (static_cast<uint64_t>(row) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(col) * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return static_cast<float>(static_cast<int>(h % 64) - 32) / 16.0f;
}

// Holds a stream until the host sets *go (pinned, mapped memory), or 10 s pass; then it sets
// *timed_out, which the host reports (the host failed to open the gate in time).
__global__ void gate(const volatile int* go, volatile int* timed_out) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (*go == 0 && t - t0 < 10000000000ull);
  if (*go == 0) *timed_out = 1;
}

// Progress on stderr, with seconds since the start, when TPGEMM_DISTGEMM_TRACE is set.
void trace(const char* what, int a = -1, int b = -1) {
  static const bool on = std::getenv("TPGEMM_DISTGEMM_TRACE") != nullptr;
  static const auto t0 = std::chrono::steady_clock::now();
  if (!on) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "[distgemm %8.3f s] %s %d %d\n", s, what, a, b);
}

// Waits for GPU g's stream: a DistGEMM run that has not ended after kRunLimitS is reported
// (GPU, stage) and the process exits, instead of hanging in cudaStreamSynchronize.
constexpr double kRunLimitS = 60;
void wait_or_exit(int g, cudaStream_t s, const char* stage) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) CK(e);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > kRunLimitS) {
      std::fflush(stdout);
      std::fprintf(stderr, "tpgemm-cutlass-distgemm: GPU %d: %s has not ended after %.0f s (hung)\n", g, stage, kRunLimitS);
      std::fflush(stderr);
      std::_Exit(3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

// rows x cols of operand `which`, row-major with leading dimension `ld`, from global (row0, 0).
__global__ void fill_operand(T* p, int64_t rows, int64_t cols, int64_t ld, int64_t row0, int which) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * cols;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    p[(i / cols) * ld + i % cols] = T(operand_value(which, row0 + i / cols, i % cols));
}

struct Result {
  double ms = 0;
  int mismatches = 0, checked = 0;  // both checks' sampled elements
};

// Sampled elements of every GPU's D against a double dot product of the operands as stored
// (A's rows on the GPU that owns them, B's on GPU g): within bf16's rounding of the result plus
// an fp32 summation error bound; a wrong row, column or stage is off by the whole value.
void check_sampled(Result& r, const std::vector<T*>& a, const std::vector<T*>& b, const std::vector<T*>& d, int64_t a_rows,
                   int64_t m, int64_t n_rank, int64_t k, int samples) {
  std::mt19937_64 rng(67890);
  std::vector<T> a_row(k), b_row(k);
  for (size_t g = 0; g < d.size(); ++g) {
    for (int s = 0; s < samples; ++s) {
      const int64_t i = static_cast<int64_t>(rng() % m), j = static_cast<int64_t>(rng() % n_rank);
      CK(cudaMemcpy(a_row.data(), a[i / a_rows] + (i % a_rows) * k, sizeof(T) * k, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(b_row.data(), b[g] + j * k, sizeof(T) * k, cudaMemcpyDeviceToHost));
      double want = 0, magnitude = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double t = static_cast<double>(static_cast<float>(a_row[kk])) * static_cast<float>(b_row[kk]);
        want += t, magnitude += std::abs(t);
      }
      T got;
      CK(cudaMemcpy(&got, d[g] + i * n_rank + j, sizeof(T), cudaMemcpyDeviceToHost));
      const double err = std::abs(static_cast<double>(static_cast<float>(got)) - want);
      r.mismatches += !(err <= std::ldexp(std::abs(want), -8) + std::ldexp(magnitude, -14));  // NaN fails
      ++r.checked;
    }
  }
}

// The GEMM every stage runs (the same at every W).
using CtaTile = Shape<_128, _256, _64>;
using CtaCluster = Shape<_1, _2, _1>;
using Row = cutlass::layout::RowMajor;
using Col = cutlass::layout::ColumnMajor;  // B [N, K], K contiguous: tpgemm's b_layout=nk
constexpr int kAlign = 8;
using Epilogue = cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, CtaTile, CtaCluster, cutlass::epilogue::collective::EpilogueTileAuto,
    float, float, T, Row, kAlign, T, Row, kAlign, cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
using Mainloop = cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, T, Row, kAlign, T, Col, kAlign, float, CtaTile, CtaCluster,
    cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
    cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue>;

template <int W>
struct DistGemmAt {
  using Schedule = cutlass::distributed::schedules::AllGather1D_TilingCD_RotatingA<Int<W>>;
  using DistKernel = cutlass::distributed::kernel::DistributedGemmKernelWrapper<Kernel, Schedule>;
  using Dist = cutlass::distributed::device::DistributedGemmUniversalAdapter<DistKernel>;

  // Per-rank M x N x K as tpgemm counts it; CUTLASS's problem is M x (N W) x K.
  static Result run(int64_t m, int64_t n_rank, int64_t k, int iterations, int warmup) {
    if (k > 8192) throw std::runtime_error("the exact check holds for K <= 8192 (fp32 sums of multiples of 1/256)");
    const int n = static_cast<int>(n_rank * W);
    const auto problem = make_tuple(static_cast<int>(m), n, static_cast<int>(k), 1);
    const auto shape_a = Schedule::get_local_a_shape(problem);  // (M / W, K, 1)
    const auto shape_b = Schedule::get_local_b_shape(problem);  // (N / W, K, 1)
    const auto shape_d = Schedule::get_local_d_shape(problem);  // (M, N / W, 1)
    const int64_t a_rows = get<0>(shape_a), b_rows = get<0>(shape_b), d_rows = get<0>(shape_d), d_cols = get<1>(shape_d);
    if (a_rows * W != m || b_rows * W != n || d_rows != m || d_cols != n_rank)
      throw std::runtime_error("unexpected shard shapes for AllGather1D_TilingCD_RotatingA");
    // Packed shards: A [M / W, K] and B [N / W, K] row-major (K contiguous), D [M, N / W] row-major.
    typename Kernel::StrideA stride_a{};
    typename Kernel::StrideB stride_b{};
    typename Kernel::StrideD stride_d{};
    get<0>(stride_a) = k, get<2>(stride_a) = a_rows * k;
    get<0>(stride_b) = k, get<2>(stride_b) = b_rows * k;
    get<0>(stride_d) = d_cols, get<2>(stride_d) = d_rows * d_cols;

    std::vector<T*> a(W), b(W), d(W);
    std::vector<void*> workspace(W), exclusive(W);
    std::vector<cudaStream_t> stream(W);
    std::vector<cudaEvent_t> start(W), stop(W);
    std::vector<Dist> dist(W);
    std::vector<typename Dist::Arguments> args(W);
    for (int g = 0; g < W; ++g) {
      CK(cudaSetDevice(g));
      cudaFuncAttributes loaded{};  // loads the gate now, not on its first launch (NOTE [lazy loading])
      CK(cudaFuncGetAttributes(&loaded, gate));
      CK(cudaStreamCreateWithFlags(&stream[g], cudaStreamNonBlocking));
      CK(cudaEventCreate(&start[g]));
      CK(cudaEventCreate(&stop[g]));
      CK(cudaMalloc(&a[g], sizeof(T) * a_rows * k));
      CK(cudaMalloc(&b[g], sizeof(T) * b_rows * k));
      CK(cudaMalloc(&d[g], sizeof(T) * d_rows * d_cols));
      fill_operand<<<1024, 256, 0, stream[g]>>>(a[g], a_rows, k, k, g * a_rows, 0);  // device g: row block g
      fill_operand<<<1024, 256, 0, stream[g]>>>(b[g], b_rows, k, k, g * b_rows, 1);
      CK(cudaGetLastError());
      args[g] = typename Dist::Arguments{
          cutlass::gemm::GemmUniversalMode::kGemm,
          problem,
          {a[g], stride_a, b[g], stride_b},
          {{1.0f, 0.0f}, d[g], stride_d, d[g], stride_d},  // beta = 0: C (D itself) is not read
          {},
          {}};
      CK(cudaMalloc(&workspace[g], std::max<size_t>(Dist::get_workspace_size(args[g]), 16)));
      CK(cudaMalloc(&exclusive[g], std::max<size_t>(Dist::get_exclusive_workspace_size(), 16)));
      CK(cudaMemsetAsync(exclusive[g], 0, Dist::get_exclusive_workspace_size(), stream[g]));
      CK(cudaStreamSynchronize(stream[g]));
    }
    for (int g = 0; g < W; ++g) {
      CK(cudaSetDevice(g));
      CK_CUTLASS(dist[g].can_implement(args[g]));
      CK_CUTLASS(dist[g].initialize(args.data(), workspace.data(), exclusive.data(), g, stream[g], false));
      CK(cudaStreamSynchronize(stream[g]));
    }
    trace("initialized, W m", W, static_cast<int>(m));
    int* go = nullptr;  // go[0]: the gates' flag; go[1]: set by a gate that timed out
    CK(cudaHostAlloc(&go, 2 * sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped));
    volatile int* flags = go;
    flags[1] = 0;
    int run_index = 0;
    auto run_all = [&](bool timed) {
      if (timed) {  // every GPU held at its gate, start events behind it; then opened
        flags[0] = 0;
        for (int g = 0; g < W; ++g) {
          CK(cudaSetDevice(g));
          gate<<<1, 1, 0, stream[g]>>>(go, go + 1);
          CK(cudaGetLastError());
          CK(cudaEventRecord(start[g], stream[g]));
        }
        flags[0] = 1;
      }
      // The DistGEMM graphs only now, no GPU held by the host (as example 65 does).
      for (int g = 0; g < W; ++g) {
        CK(cudaSetDevice(g));
        CK_CUTLASS(dist[g].run(stream[g]));
        if (timed) CK(cudaEventRecord(stop[g], stream[g]));
      }
      trace("run launched, index timed", run_index, timed);
      float slowest = 0;
      for (int g = 0; g < W; ++g) {
        CK(cudaSetDevice(g));
        wait_or_exit(g, stream[g], timed ? "a timed DistGEMM run" : "the first (checked) DistGEMM run");
        float ms = 0;
        if (timed) CK(cudaEventElapsedTime(&ms, start[g], stop[g]));
        slowest = std::max(slowest, ms);
      }
      if (flags[1] != 0) throw std::runtime_error("a gate timed out (10 s): the host did not open it in time");
      trace("run done, index ms*1000", run_index++, static_cast<int>(slowest * 1000));
      return slowest;
    };
    Result r;
    for (int g = 0; g < W; ++g) {  // poison D (on the stream that runs, so before it), run once, check it
      CK(cudaSetDevice(g));
      CK(cudaMemsetAsync(d[g], 0xFF, sizeof(T) * d_rows * d_cols, stream[g]));  // NaN in bf16
    }
    run_all(false);
    trace("first run done");
    std::mt19937_64 rng(12345);
    for (int g = 0; g < W; ++g) {
      CK(cudaSetDevice(g));
      for (int s = 0; s < 512; ++s) {
        const int64_t i = static_cast<int64_t>(rng() % m), j = static_cast<int64_t>(rng() % n_rank);
        double want = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          want += static_cast<double>(operand_value(0, i, kk)) * operand_value(1, g * n_rank + j, kk);
        T got;
        CK(cudaMemcpy(&got, d[g] + i * d_cols + j, sizeof(T), cudaMemcpyDeviceToHost));
        r.mismatches += !(static_cast<float>(got) == static_cast<float>(T(static_cast<float>(want))));
        ++r.checked;
      }
    }
    for (int g = 0; g < W; ++g) {  // tpgemm-bench's data, D poisoned again; checked, then timed
      CK(cudaSetDevice(g));
      tpgemm::testing::fill_random(a[g], tpgemm::DType::kBF16, 1, a_rows, k, g * a_rows, m, 1, stream[g]);
      tpgemm::testing::fill_random(b[g], tpgemm::DType::kBF16, 1, b_rows, k, g * b_rows, n, 2, stream[g]);
      CK(cudaMemsetAsync(d[g], 0xFF, sizeof(T) * d_rows * d_cols, stream[g]));
      CK(cudaStreamSynchronize(stream[g]));
    }
    run_all(false);
    check_sampled(r, a, b, d, a_rows, m, n_rank, k, 128);
    for (int i = 0; i < warmup; ++i) run_all(true);  // as timed (the gate kernel loaded), not kept
    std::vector<float> times;
    for (int i = 0; i < iterations; ++i) times.push_back(run_all(true));
    std::sort(times.begin(), times.end());
    r.ms = times[times.size() / 2];
    cudaFreeHost(go);
    for (int g = 0; g < W; ++g) {
      CK(cudaSetDevice(g));
      cudaFree(a[g]), cudaFree(b[g]), cudaFree(d[g]), cudaFree(workspace[g]), cudaFree(exclusive[g]);
      cudaEventDestroy(start[g]), cudaEventDestroy(stop[g]), cudaStreamDestroy(stream[g]);
    }
    return r;
  }
};

}  // namespace tpgemm::peers

int main(int argc, char** argv) {
  using namespace tpgemm::peers;
  int world = 0, iterations = 40, warmup = 10;
  std::string shapes_file, json;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value == nullptr) return std::fprintf(stderr, "%s: expected a value\n", flag.c_str()), 2;
    if (flag == "--gpus") world = std::atoi(value);
    else if (flag == "--shapes") shapes_file = value;
    else if (flag == "--iterations") iterations = std::max(1, std::atoi(value));
    else if (flag == "--warmup-iterations") warmup = std::max(0, std::atoi(value));
    else if (flag == "--json") json = value;
    else return std::fprintf(stderr, "unknown flag %s\n", flag.c_str()), 2;
    ++i;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row reaches a log as it is printed
  try {
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
      std::fprintf(stderr, "tpgemm-cutlass-distgemm: no GPU on this machine\n");
      return 1;
    }
    if (world == 0) world = gpus;
    if (world != 2 && world != 4 && world != 8)
      throw std::runtime_error("--gpus " + std::to_string(world) + ": expected 2, 4 or 8 (CUTLASS's TP is a template)");
    if (world > gpus) throw std::runtime_error("--gpus " + std::to_string(world) + ": only " + std::to_string(gpus));
    for (int g = 0; g < world; ++g) {
      CK(cudaSetDevice(g));
      for (int p = 0; p < world; ++p) {
        int ok = 0;
        if (p == g) continue;
        CK(cudaDeviceCanAccessPeer(&ok, g, p));
        if (!ok) throw std::runtime_error("GPU " + std::to_string(g) + " cannot access GPU " + std::to_string(p));
        const cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
        cudaGetLastError();
      }
    }
    const auto shapes = shapes_file.empty() ? tpgemm::bench::parse_shapes(tpgemm::bench::kDefaultShapes, "built-in bench/shapes.txt")
                                            : tpgemm::bench::read_shapes_file(shapes_file);
    std::string rows;  // the JSON rows, one per shape (ms 0 where the run failed)
    auto add_row = [&](const tpgemm::bench::ShapeSpec& s, double ms, double tflops, const char* check) {
      char row[256];
      std::snprintf(row, sizeof(row),
                    "%s{\"op\": \"ag\", \"W\": %d, \"M\": %lld, \"N\": %lld, \"K\": %lld, \"impl\": \"cutlass-distgemm\", "
                    "\"ms\": %.6f, \"tflops_per_gpu\": %.2f, \"check\": \"%s\"}",
                    rows.empty() ? "" : ",\n", world, (long long)s.m, (long long)s.n, (long long)s.k, ms, tflops, check);
      rows += row;
    };
    int failed = 0;
    std::printf("%-4s %3s %6s %6s %6s %-18s %9s %8s  %s\n", "op", "W", "M", "N", "K", "impl", "ms", "TFLOP/s", "check");
    for (const auto& s : shapes) {
      if (s.allreduce || s.op != tpgemm::Op::kAgGemm) continue;
      std::string note;
      if (s.m % (128 * world) != 0 || s.n % 256 != 0 || s.k % 64 != 0) {
        std::printf("ag   %3d %6lld %6lld %6lld %-18s  skipped: CUTLASS's schedule needs whole tiles per stage\n",
                    world, (long long)s.m, (long long)s.n, (long long)s.k, "cutlass-distgemm");
        continue;
      }
      Result r;
      try {
        r = world == 2 ? DistGemmAt<2>::run(s.m, s.n, s.k, iterations, warmup)
            : world == 4 ? DistGemmAt<4>::run(s.m, s.n, s.k, iterations, warmup)
                         : DistGemmAt<8>::run(s.m, s.n, s.k, iterations, warmup);
      } catch (const std::exception& e) {
        std::printf("ag   %3d %6lld %6lld %6lld %-18s  FAILED: %s\n", world, (long long)s.m, (long long)s.n,
                    (long long)s.k, "cutlass-distgemm", e.what());
        ++failed;
        add_row(s, 0, 0, "failed");
        continue;
      }
      const double tflops = 2.0 * s.m * s.n * s.k / (r.ms * 1e-3) / 1e12;
      const bool ok = r.mismatches == 0;
      failed += !ok;
      std::printf("ag   %3d %6lld %6lld %6lld %-18s %9.3f %8.1f  %s (%d of %d sampled elements right)\n", world,
                  (long long)s.m, (long long)s.n, (long long)s.k, "cutlass-distgemm", r.ms, tflops, ok ? "ok" : "FAIL",
                  r.checked - r.mismatches, r.checked);
      add_row(s, r.ms, tflops, ok ? "pass" : "fail");
    }
    if (!json.empty()) std::ofstream(json) << "[\n" << rows << "\n]\n";
    return failed == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpgemm-cutlass-distgemm: %s\n", e.what());
    return 1;
  }
}
