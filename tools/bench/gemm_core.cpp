// tpgemm-bench --op gemm: the local matmul alone on each GPU.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_rank.h"
#include "core/check.h"
#include "gemm/lt_matmul.h"
#include "gemm/sm90_config.h"
#include "gemm/sm90_gemm.h"
#include "ops/gemm_rs/tile_reduce.h"
#include "testing/testing.h"

namespace tpgemm::bench {

// --op gemm: on each rank's GPU, cuBLASLt (the baseline of the row's ratio), every configuration
// of the GEMM core, and the core's own choice, on the same random operands.
void Runner::run_gemm_core(const ShapeSpec& s) {
  const DType dt = cfg_.dtype;
  const int64_t l = cfg_.l, count = l * s.m * s.n;
  const size_t es = dtype_size(dt);
  const cudaStream_t st = stream_.get();
  gemm::MatmulShape shape = gemm::packed_shape(s.m, s.n, s.k, l, dt, cfg_.b_layout);
  shape.has_c = cfg_.beta != 0.0f;
  ResultRow base;
  base.op = "gemm";
  base.world = t_.world;
  base.m = s.m, base.n = s.n, base.k = s.k, base.l = l;
  base.dtype = std::string(to_string(dt));
  const bool kn = cfg_.b_layout == BLayout::kKN;
  DeviceBuffer a(static_cast<size_t>(l * s.m * s.k) * es), b(static_cast<size_t>(l * s.k * s.n) * es);
  DeviceBuffer c(shape.has_c ? static_cast<size_t>(count) * es : 0), d(static_cast<size_t>(count) * es), ref;
  testing::fill_random(a.get(), dt, l, s.m, s.k, 0, s.m, kSeedGemmCore, st);
  testing::fill_random(b.get(), dt, l, kn ? s.k : s.n, kn ? s.n : s.k, 0, kn ? s.k : s.n, kSeedGemmCore + 1, st);
  if (shape.has_c) testing::fill_random(c.get(), dt, l, s.m, s.n, 0, s.m, kSeedGemmCore + 2, st);
  if (cfg_.check) {
    ref = DeviceBuffer(static_cast<size_t>(count) * sizeof(float));
    TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref.get(), 0, ref.bytes(), st));
    testing::reference_gemm(a.get(), b.get(), c.get(), ref.as<float>(), s.m, s.n, s.k, l, dt, cfg_.b_layout, cfg_.alpha,
                            cfg_.beta, testing::RefEngine::kCublasLt, t_.lt, st);
  }
  auto check = [&](const std::function<void()>& fn) {
    return [&, fn](bool* ok) {
      return check_once(d.get(), count, dt, testing::default_eps(dt), fn,
                        [&] { return testing::compare(d.get(), dt, ref.as<float>(), 1, count, 0, 0, 0, st); }, ok);
    };
  };
  DeviceBuffer lt_ws(gemm::LtMatmul::kWorkspaceBytes);
  const gemm::LtMatmul lt(t_.lt, shape);
  const std::function<void()> lt_fn = [&] { lt.run(a.get(), b.get(), c.get(), d.get(), cfg_.alpha, cfg_.beta, lt_ws.get(), st); };
  {
    ResultRow row = base;
    row.impl = row.chosen = "cublaslt";
    measure(row, lt_fn, check(lt_fn));
    base.baseline_ms = row.baseline_ms = row.ms;
    print(table_row(row));
    rows_.push_back(row);
  }
  std::vector<std::string> names;
  for (const auto& info : gemm::sm90::configs()) names.emplace_back(info.name);
  names.emplace_back("sm90_rule");  // the rule of sm90_config.cpp
  names.emplace_back("sm90_auto");  // the core's own choice: measured (NOTE [measured core config]), or TPGEMM_SM90_CONFIG's
  // A row's ratio is against cuBLASLt timed in alternation with it (time_interleaved_ms).
  const auto time_core = [&](ResultRow& row, const gemm::Sm90Gemm& mm) {
    row.chosen = mm.config();
    DeviceBuffer ws(mm.workspace_bytes());
    const std::function<void()> fn = [&] { mm.run(a.get(), b.get(), c.get(), d.get(), cfg_.alpha, cfg_.beta, ws.get(), st); };
    measure(row, fn, check(fn), [&] {
      const std::vector<double> t = timer_.time_interleaved_ms({lt_fn, fn});
      row.baseline_ms = t[0], row.ms = t[1];
    });
    print(table_row(row));
    rows_.push_back(row);
  };
  for (const std::string& name : names) {
    ResultRow row = base;
    row.impl = name;
    const std::string_view asked = name == "sm90_auto"   ? std::string_view()
                                   : name == "sm90_rule" ? std::string_view("rule")
                                                         : std::string_view(name);
    auto mm = make_or_report<gemm::Sm90Gemm>(row, shape, asked);
    if (mm != nullptr) time_core(row, *mm);
  }
  // The fused GEMM+ReduceScatter's and GEMM+AllReduce's kernel (coop_128x256_c2x1 serving tile
  // rows in order and raising a flag per tile, NOTE [tile signal]): what the fused ops' GEMM costs.
  const int64_t m_tiles = (s.m + ops::kTileReduceM - 1) / ops::kTileReduceM;
  const int64_t n_tiles = (s.n + ops::kTileReduceN - 1) / ops::kTileReduceN;
  DeviceBuffer flags(static_cast<size_t>(l * m_tiles * n_tiles) * sizeof(uint64_t)), seq(sizeof(uint64_t));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(flags.get(), 0, flags.bytes(), st));
  TPGEMM_CUDA_CHECK(cudaMemsetAsync(seq.get(), 1, seq.bytes(), st));  // any call number but 0
  gemm::sm90::TileSignal signal;
  signal.flags = flags.as<uint64_t>();
  signal.seq = seq.as<uint64_t>();
  signal.m_tiles = m_tiles, signal.n_tiles = n_tiles;
  ResultRow row = base;
  row.impl = "coop_128x256_c2x1+tile_signal";
  auto mm = make_or_report<gemm::Sm90Gemm>(row, shape, gemm::sm90::TileRowOrder{}, signal);
  if (mm != nullptr) time_core(row, *mm);
}

}  // namespace tpgemm::bench
