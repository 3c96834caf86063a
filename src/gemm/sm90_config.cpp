#include "gemm/sm90_config.h"

#include <algorithm>
#include <climits>
#include <iterator>

#include "core/env.h"
#include "core/format.h"

namespace tpgemm::gemm::sm90 {
namespace {

// NOTE [sm90 configs]: the order is that of the kernel tables in sm90_gemm.cpp. rate and
// tile_overhead began as estimates (operand reuse per tile; whether the epilogue hides under
// another tile's mainloop). Calibrated on H200 with `tpgemm-bench --op gemm` (every
// configuration timed in alternation with cuBLASLt; docs/perf.md, the GEMM core):
// pingpong's epilogue hides under its partner warp group's mainloop, tile_overhead 0, which
// makes the rule pick the configuration measured fastest (or within 3% of it) on every
// benchmark shape, and the geomean over them 1.009x cuBLASLt's speed, bf16 and fp16 together.
// Configurations added later, with in_rule false, were never calibrated: only the measured
// choice (NOTE [measured core config]) times them, and the rule's picks stay as calibrated.
constexpr ConfigInfo kConfigs[] = {
    {"coop_128x256_c2x1", 128, 256, 64, 2, 1, Schedule::kCooperative, 1.00, 3.0},
    {"coop_256x128_c1x2", 256, 128, 64, 1, 2, Schedule::kCooperative, 1.00, 3.0},
    {"pingpong_128x128_c1x2", 128, 128, 64, 1, 2, Schedule::kPingpong, 0.93, 0.0},
    {"streamk_128x256_c2x1", 128, 256, 64, 2, 1, Schedule::kStreamK, 1.00, 3.0},
    {"coop_128x128_c1x1", 128, 128, 64, 1, 1, Schedule::kCooperative, 0.90, 3.0, /*in_rule=*/false},
    {"pingpong_64x128_c1x1", 64, 128, 64, 1, 1, Schedule::kPingpong, 0.85, 0.0, /*in_rule=*/false},
    {"coop_256x192_c1x2", 256, 192, 64, 1, 2, Schedule::kCooperative, 1.05, 3.0, /*in_rule=*/false},
    {"coop_256x192_c2x1", 256, 192, 64, 2, 1, Schedule::kCooperative, 1.05, 3.0, /*in_rule=*/false},
    {"coop_128x192_c2x1", 128, 192, 64, 2, 1, Schedule::kCooperative, 0.97, 3.0, /*in_rule=*/false},
};

// Stream-K pays for partial sums through global memory and their ordered reduction: a fixed
// cost in k-blocks, and a margin by which it must beat the best persistent configuration.
constexpr double kStreamKFixup = 4.0;
constexpr double kStreamKMargin = 0.95;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::span<const ConfigInfo> configs() { return kConfigs; }

std::optional<int> find_config(std::string_view name) {
  for (int i = 0; i < static_cast<int>(std::size(kConfigs)); ++i)
    if (name == kConfigs[i].name) return i;
  return std::nullopt;
}

std::string config_names() {
  std::string out;
  for (const ConfigInfo& c : kConfigs) out += (out.empty() ? "" : ", ") + std::string(c.name);
  return out;
}

Status check_shape(const MatmulShape& s) {
  auto no = [](ErrorCode code, const std::string& msg) { return Status{code, "sm90 GEMM core: " + msg}; };
  const auto ll = [](int64_t v) { return static_cast<long long>(v); };
  if (out_type(s) != s.dtype)
    return no(ErrorCode::kUnsupported, strfmt("an output type of its own (%s) is not supported: D is written in the "
                                              "input type", std::string(to_string(out_type(s))).c_str()));
  if (s.dtype != DType::kBF16 && s.dtype != DType::kFP16)
    return no(ErrorCode::kUnsupported, strfmt("dtype %d: expected bf16 or fp16", static_cast<int>(s.dtype)));
  if (s.b_layout != BLayout::kNK && s.b_layout != BLayout::kKN)
    return no(ErrorCode::kUnsupported, strfmt("B layout %d: expected nk or kn", static_cast<int>(s.b_layout)));
  if (s.a_transposed) return no(ErrorCode::kUnsupported, "A stored [K, M] is not supported: expected A as [M, K]");
  if (s.m < 1 || s.n < 1 || s.k < 1 || s.batch < 1)
    return no(ErrorCode::kInvalidArgument, strfmt("M=%lld N=%lld K=%lld L=%lld: each must be >= 1", ll(s.m), ll(s.n),
                                                  ll(s.k), ll(s.batch)));
  if (s.m > INT_MAX || s.n > INT_MAX || s.k > INT_MAX || s.batch > INT_MAX)
    return no(ErrorCode::kUnsupported, "M, N, K and L must each fit in 32 bits (CUTLASS's problem shape)");
  // TMA moves rows that start on 16-byte boundaries: every row stride (and so K for A, N for D)
  // is a multiple of 8 elements.
  if (s.k % 8 != 0)
    return no(ErrorCode::kUnsupported, strfmt("K=%lld: must be a multiple of 8 (TMA needs 16-byte aligned rows)", ll(s.k)));
  if (s.n % 8 != 0)
    return no(ErrorCode::kUnsupported, strfmt("N=%lld: must be a multiple of 8 (TMA needs 16-byte aligned rows)", ll(s.n)));
  const int64_t b_row = s.b_layout == BLayout::kNK ? s.k : s.n;
  struct Ld { const char* name; int64_t ld, row; bool used; };
  for (const Ld x : {Ld{"lda", s.lda, s.k, true}, Ld{"ldb", s.ldb, b_row, true}, Ld{"ldc", s.ldc, s.n, s.has_c},
                     Ld{"ldd", s.ldd, s.n, true}}) {
    if (!x.used) continue;
    if (x.ld < x.row || x.ld % 8 != 0)
      return no(ErrorCode::kInvalidArgument, strfmt("%s=%lld: must be >= the row length %lld and a multiple of 8",
                                                    x.name, ll(x.ld), ll(x.row)));
  }
  if (s.batch > 1)
    for (const Ld x : {Ld{"stride_a", s.stride_a, 0, true}, Ld{"stride_b", s.stride_b, 0, true},
                       Ld{"stride_c", s.stride_c, 0, s.has_c}, Ld{"stride_d", s.stride_d, 0, true}})
      if (x.used && (x.ld < 0 || x.ld % 8 != 0))
        return no(ErrorCode::kInvalidArgument, strfmt("%s=%lld: batch strides must be non-negative multiples of 8",
                                                      x.name, ll(x.ld)));
  // Batches of D must not overlap: their tiles would race.
  if (s.batch > 1 && s.stride_d < s.m * s.ldd)
    return no(ErrorCode::kInvalidArgument, strfmt("stride_d=%lld: batches of D overlap (expected >= M x ldd = %lld)",
                                                  ll(s.stride_d), ll(s.m * s.ldd)));
  return Status::Ok();
}

// NOTE [sm90 config rule]
// Each configuration is a persistent kernel: ctas = the SMs, rounded down to whole clusters,
// loop over the output tiles. The cost of one is the busiest CTA's time, in k-blocks (64 deep)
// of a 128x256 tile:
//   persistent: ceil(tiles / ctas) * (k_blocks + tile_overhead) * area / rate
//   stream-K:   (ceil(tiles * k_blocks / ctas) + ceil(tiles / ctas) * tile_overhead) * area / rate
//               + kStreamKFixup  (the k-blocks of all tiles are spread evenly over the CTAs)
// where area = tile_m * tile_n / (128 * 256). The cheapest persistent configuration wins (ties:
// table order); stream-K replaces it only below kStreamKMargin of its cost. So the choice turns
// on how the tile grid quantizes into waves of `ctas`, which is what differs between shapes.
double estimated_cost(const ConfigInfo& c, int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count) {
  const int cluster = c.cluster_m * c.cluster_n;
  const int64_t ctas = std::max<int64_t>(cluster, sm_count / cluster * cluster);
  const int64_t tiles = ceil_div(m, c.tile_m) * ceil_div(n, c.tile_n) * batch;
  const int64_t kb = ceil_div(k, c.tile_k);
  const double area = static_cast<double>(c.tile_m) * c.tile_n / (128.0 * 256.0);
  if (c.schedule == Schedule::kStreamK)
    return (static_cast<double>(ceil_div(tiles * kb, ctas)) + static_cast<double>(ceil_div(tiles, ctas)) * c.tile_overhead) *
               area / c.rate + kStreamKFixup;
  return static_cast<double>(ceil_div(tiles, ctas)) * (static_cast<double>(kb) + c.tile_overhead) * area / c.rate;
}

int choose_config(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count) {
  int best = -1, best_sk = -1;
  double cost = 0, cost_sk = 0;
  for (int i = 0; i < static_cast<int>(std::size(kConfigs)); ++i) {
    if (!kConfigs[i].in_rule) continue;
    const double e = estimated_cost(kConfigs[i], m, n, k, batch, sm_count);
    if (kConfigs[i].schedule == Schedule::kStreamK) {
      if (best_sk < 0 || e < cost_sk) best_sk = i, cost_sk = e;
    } else if (best < 0 || e < cost) {
      best = i, cost = e;
    }
  }
  return best_sk >= 0 && cost_sk < kStreamKMargin * cost ? best_sk : best;
}

int fastest_config(std::vector<TimedConfig> timed, int rule) {
  constexpr double kRuleTie = 0.99;  // another configuration must be 1% faster than the rule's
  int best = -1;
  float best_ms = 0, rule_ms = -1;
  for (TimedConfig& t : timed) {
    if (t.ms.empty()) continue;
    std::sort(t.ms.begin(), t.ms.end());
    const float m = t.ms[t.ms.size() / 2];
    if (t.config == rule) rule_ms = m;
    if (best < 0 || m < best_ms) best = t.config, best_ms = m;
  }
  return rule_ms > 0 && best_ms >= kRuleTie * rule_ms ? rule : best;
}

bool fused_tiles_one_wave(int64_t m, int64_t n, int64_t batch, int sm_count) {
  return ceil_div(m, 256) * 2 * ceil_div(n, 256) * batch <= sm_count;  // clusters of two tiles along M
}

int swizzle_setting(int fallback) {
  const std::optional<int64_t> v = env_int("TPGEMM_SM90_SWIZZLE", 1, 8);
  if (v && (*v & (*v - 1)) != 0)
    throw Error(ErrorCode::kInvalidArgument,
                strfmt("TPGEMM_SM90_SWIZZLE=%lld: expected 1, 2, 4 or 8 (a power of two)", static_cast<long long>(*v)));
  return static_cast<int>(v.value_or(fallback));
}

int chunk_wait_swizzle(int64_t m, int64_t n, int64_t rows_per_rank) {
  const int64_t tile_cols = (n + 255) / 256, cluster_rows = (m + 255) / 256, per_block = rows_per_rank / 256;
  for (int s : {8, 4, 2})
    if (s <= per_block && tile_cols % s == 0 && cluster_rows % s == 0) return s;
  return 1;
}

}  // namespace tpgemm::gemm::sm90
