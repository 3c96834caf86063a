#include "gemm/sm90_measured.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "gemm/sm90_config.h"
#include "gemm/sm90_gemm.h"
#include "ops/common/random_fill.h"

namespace tpgemm::gemm {
namespace {

// A single call of a large matmul varies by a few percent (clocks, the tile order's luck): five
// rounds of at least two calls each keep one outlier from deciding.
constexpr int kRounds = 5;
constexpr double kRoundMs = 2.0;  // calls of one configuration per round: about this long
constexpr int kMinCalls = 2;
constexpr int kMaxCalls = 20;

// Elements a strided operand spans: `rows` rows of stride `ld`, `batch` entries `stride` apart.
int64_t span(int64_t batch, int64_t stride, int64_t rows, int64_t ld) { return (batch - 1) * stride + rows * ld; }

struct Timed {
  std::unique_ptr<Sm90Gemm> gemm;
  DeviceBuffer workspace;
  int config = 0;
  CudaGraph calls;        // (after what it uses: freed first)
  std::vector<float> ms;  // per call, one per round
};

// The fastest configuration for `s`, timed; nullopt where the timing could not run (memory).
std::optional<int> time_configs(const MatmulShape& s, int rule) {
  const size_t es = dtype_size(s.dtype);
  const int64_t b_rows = s.b_layout == BLayout::kNK ? s.n : s.k;
  const int64_t na = span(s.batch, s.stride_a, s.m, s.lda), nb = span(s.batch, s.stride_b, b_rows, s.ldb);
  const int64_t nd = span(s.batch, s.stride_d, s.m, s.ldd), nc = s.has_c ? span(s.batch, s.stride_c, s.m, s.ldc) : 0;
  size_t free_bytes = 0, total = 0;
  TPGEMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  if (static_cast<size_t>(na + nb + nc + nd) * es > free_bytes / 4) return std::nullopt;
  const Stream stream = Stream::create();
  const cudaStream_t st = stream.get();
  DeviceBuffer a(static_cast<size_t>(na) * es), b(static_cast<size_t>(nb) * es), c(static_cast<size_t>(nc) * es),
      d(static_cast<size_t>(nd) * es);
  // Random operands: a tensor core multiplying constants draws less power, and the configurations
  // differ in how hard they run it.
  ops::fill_random(a.get(), s.dtype, 1, 1, na, 0, 1, 0x5e90a, st);
  ops::fill_random(b.get(), s.dtype, 1, 1, nb, 0, 1, 0x5e90b, st);
  if (s.has_c) ops::fill_random(c.get(), s.dtype, 1, 1, nc, 0, 1, 0x5e90c, st);
  std::vector<Timed> cands;
  for (int i = 0; i < static_cast<int>(sm90::configs().size()); ++i) {
    Timed t;
    try {
      t.gemm = std::make_unique<Sm90Gemm>(s, sm90::configs()[i].name);
    } catch (const Error&) {
      continue;  // this configuration cannot run the shape
    }
    t.workspace = DeviceBuffer(t.gemm->workspace_bytes());
    t.config = i;
    cands.push_back(std::move(t));
  }
  if (cands.size() < 2) return cands.empty() ? rule : cands[0].config;
  const Event start = Event::create(/*timing=*/true), stop = Event::create(/*timing=*/true);
  const auto enqueue = [&](Timed& t, int n) {
    for (int i = 0; i < n; ++i) t.gemm->run(a.get(), b.get(), c.get(), d.get(), 1.0f, 1.0f, t.workspace.get(), st);
  };
  for (Timed& t : cands) time_between(st, start, stop, [&] { enqueue(t, 1); });  // first use: not timed
  const float first = time_between(st, start, stop, [&] { enqueue(cands[0], 1); });
  const int n = static_cast<int>(std::clamp<double>(std::ceil(kRoundMs / std::max(first, 1e-3f)), kMinCalls, kMaxCalls));
  // Each round replays a graph of n calls: the GPU's time, not the host's (CUTLASS builds each
  // call's parameters on the host, as long as a small matmul).
  for (Timed& t : cands) t.calls = CudaGraph::capture(st, [&] { enqueue(t, n); });
  for (int r = 0; r < kRounds; ++r)
    for (Timed& t : cands)
      t.ms.push_back(time_between(st, start, stop, [&] { t.calls.launch(st); }) / static_cast<float>(n));
  std::vector<sm90::TimedConfig> timed;
  for (const Timed& t : cands) timed.push_back({t.config, t.ms});
  return sm90::fastest_config(std::move(timed), rule);
}

}  // namespace

int measured_config(const MatmulShape& s, int rule) {
  if (tuning_switched_off()) return rule;
  int device = 0;
  TPGEMM_CUDA_CHECK(cudaGetDevice(&device));
  // By device and the whole shape (every stride, type and flag): a process makes few shapes.
  struct Kept {
    int device;
    MatmulShape shape;
    int config;
  };
  static std::mutex mutex;
  static std::vector<Kept> chosen;  // per process
  const auto find = [&]() -> const Kept* {
    for (const Kept& k : chosen)
      if (k.device == device && k.shape == s) return &k;
    return nullptr;
  };
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (const Kept* k = find()) return k->config;
  }
  std::optional<int> pick;
  try {
    pick = time_configs(s, rule);
  } catch (const Error&) {
    (void)cudaGetLastError();  // the timing's failure (memory, say) is not the caller's: the rule decides
  }
  if (!pick) return rule;  // not kept: a later plan of the shape may find the memory to time it
  const std::lock_guard<std::mutex> lock(mutex);
  if (const Kept* k = find()) return k->config;  // another thread timed it meanwhile
  chosen.push_back({device, s, *pick});
  return *pick;
}

}  // namespace tpgemm::gemm
