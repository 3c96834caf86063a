// The Hopper GEMM core's configurations, what it supports, and the rule that picks a
// configuration per shape: pure host logic (no CUDA), shared by Sm90Gemm, tpgemm-bench and the
// CPU tests. NOTE [sm90 config rule] in sm90_config.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gemm/lt_matmul.h"
#include "tpgemm/error.h"

namespace tpgemm::gemm::sm90 {

enum class Schedule { kCooperative, kPingpong, kStreamK };

struct ConfigInfo {
  const char* name;
  int tile_m, tile_n, tile_k;
  int cluster_m, cluster_n;
  Schedule schedule;
  double rate;           // mainloop throughput relative to coop_128x256_c2x1
  double tile_overhead;  // per-tile time not hidden under the mainloop, in 64-deep k-blocks
  bool in_rule = true;   // false: only the measured choice considers it (not calibrated for the rule)
};

// Every configuration compiled, in the order of the kernel tables (src/gemm/sm90_gemm.cpp).
std::span<const ConfigInfo> configs();
std::optional<int> find_config(std::string_view name);
std::string config_names();  // "a, b, c" for messages

// Ok, or Unsupported / InvalidArgument naming the field, its value and the requirement.
Status check_shape(const MatmulShape& s);

// The rule (deterministic): index into configs().
int choose_config(int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count);
// The fused AllGather+GEMM kernel's swizzle (coop 128x256, cluster 2x1, rastered along N): the
// largest of 8, 4, 2, 1 that divides the tile columns and the cluster rows (CUTLASS pads both up
// to whole swizzle groups, and padded tiles are wasted slots: N=3584, 14 tile columns, measured
// 1.42 ms at swizzle 2 against 1.65 at 8), and that is no more than the cluster rows of one rank's
// block (a wave then covers few blocks, met in arrival order). NOTE [chunk wait].
int chunk_wait_swizzle(int64_t m, int64_t n, int64_t rows_per_rank);
// The tile scheduler's swizzle: TPGEMM_SM90_SWIZZLE (1, 2, 4 or 8: CUTLASS takes a power of two;
// anything else is refused naming the variable) or `fallback`.
int swizzle_setting(int fallback);
// Whether the fused kernels' 128x256 tiles (coop_128x256_c2x1, which both extend), in clusters of
// two, fit on `sm_count` SMs at one tile per SM (CUTLASS may cap the grid lower, at the clusters
// that can be active at once). Then, in the fused AllGather+GEMM, every tile starts before any
// peer's rows arrive, and waiting for A by pieces of columns, pulled piece by piece across all
// stages, lets the tiles multiply what has arrived (NOTE [chunk wait]); in the fused reductions,
// every tile lands at about the same time and nothing is left to send beside the GEMM.
bool fused_tiles_one_wave(int64_t m, int64_t n, int64_t batch, int sm_count);
// The measured choice (NOTE [measured core config]): among configurations timed in rounds (each
// one's per-call times, one per round), the one of the lowest median; `rule` keeps it if within
// 1% (or it is the only one timed). -1 where none was.
struct TimedConfig {
  int config = 0;
  std::vector<float> ms;
};
int fastest_config(std::vector<TimedConfig> timed, int rule);
// Its cost model: the busiest CTA's time in k-blocks of a 128x256 tile.
double estimated_cost(const ConfigInfo& c, int64_t m, int64_t n, int64_t k, int64_t batch, int sm_count);

}  // namespace tpgemm::gemm::sm90
