// The Hopper GEMM core's host logic: what it supports (with the reason when not) and the rule
// choosing a configuration per shape (NOTE [sm90 config rule]).
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "gemm/sm90_config.h"
#include "ops/gemm_rs/tile_reduce.h"

namespace tpgemm::gemm::sm90 {
namespace {

constexpr int kH100Sms = 132;  // H100 SXM and H200

MatmulShape packed(int64_t m, int64_t n, int64_t k, int64_t l = 1, BLayout layout = BLayout::kNK) {
  MatmulShape s;
  s.m = m, s.n = n, s.k = k, s.batch = l;
  s.lda = k, s.ldb = layout == BLayout::kNK ? k : n, s.ldc = s.ldd = n;
  s.stride_a = m * k, s.stride_b = n * k, s.stride_c = s.stride_d = m * n;
  s.b_layout = layout;
  return s;
}

void expect_rejected(const MatmulShape& s, ErrorCode code, const std::string& words) {
  const Status st = check_shape(s);
  EXPECT_EQ(st.code, code) << st.message;
  EXPECT_NE(st.message.find(words), std::string::npos) << st.message;
}

TEST(Sm90Config, NamesAreUniqueAndFound) {
  std::set<std::string> names;
  for (const ConfigInfo& c : configs()) {
    EXPECT_TRUE(names.insert(c.name).second) << c.name;
    EXPECT_EQ(find_config(c.name), static_cast<int>(names.size()) - 1);
    EXPECT_NE(config_names().find(c.name), std::string::npos);
  }
  EXPECT_GE(names.size(), 2u);
  EXPECT_FALSE(find_config("coop_128x256"));
}

TEST(Sm90Config, SupportsBothLayoutsOddMAndBatches) {
  for (BLayout layout : {BLayout::kNK, BLayout::kKN})
    for (const auto& s : {packed(77, 136, 72, 1, layout), packed(300, 264, 520, 3, layout), packed(1, 8, 8, 1, layout)})
      EXPECT_TRUE(check_shape(s).ok()) << check_shape(s).message;
  MatmulShape with_c = packed(64, 64, 64);
  with_c.has_c = true;
  EXPECT_TRUE(check_shape(with_c).ok());
}

TEST(Sm90Config, RejectsWhatTmaCannotLoadWithTheReason) {
  expect_rejected(packed(64, 64, 100), ErrorCode::kUnsupported, "K=100: must be a multiple of 8");
  expect_rejected(packed(64, 100, 64), ErrorCode::kUnsupported, "N=100: must be a multiple of 8");
  MatmulShape fp32 = packed(64, 64, 64);
  fp32.out_dtype = DType::kFP32;
  expect_rejected(fp32, ErrorCode::kUnsupported, "output type of its own");
  MatmulShape short_ld = packed(64, 64, 64);
  short_ld.lda = 56;
  expect_rejected(short_ld, ErrorCode::kInvalidArgument, "lda=56");
  MatmulShape odd_ld = packed(64, 64, 64);
  odd_ld.ldd = 68;
  expect_rejected(odd_ld, ErrorCode::kInvalidArgument, "ldd=68");
  MatmulShape odd_c = packed(64, 64, 64, 2);
  odd_c.has_c = true;
  odd_c.stride_c = 4100;
  expect_rejected(odd_c, ErrorCode::kInvalidArgument, "stride_c=4100");
  odd_c.has_c = false;  // C's strides do not matter without C
  EXPECT_TRUE(check_shape(odd_c).ok());
  MatmulShape overlapping = packed(64, 64, 64, 2);
  overlapping.stride_d = 64 * 64 - 8;
  expect_rejected(overlapping, ErrorCode::kInvalidArgument, "batches of D overlap");
  MatmulShape bad_dtype = packed(64, 64, 64);
  bad_dtype.dtype = static_cast<DType>(7);
  expect_rejected(bad_dtype, ErrorCode::kUnsupported, "dtype 7");
  MatmulShape bad_layout = packed(64, 64, 64);
  bad_layout.b_layout = static_cast<BLayout>(5);
  expect_rejected(bad_layout, ErrorCode::kUnsupported, "B layout 5");
  expect_rejected(packed(0, 64, 64), ErrorCode::kInvalidArgument, "M=0");
  expect_rejected(packed(int64_t(1) << 32, 64, 64), ErrorCode::kUnsupported, "32 bits");
}

TEST(Sm90Config, RuleIsDeterministicAndPicksByWaveQuantization) {
  const auto pick = [](int64_t m, int64_t n, int64_t k, int sms = kH100Sms) {
    return std::string(configs()[choose_config(m, n, k, 1, sms)].name);
  };
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pick(8192, 8192, 8192), pick(8192, 8192, 8192));
  // 2048 tiles of 128x256 fill 132 SMs in 15.5 waves (97%): the persistent workhorse.
  EXPECT_EQ(pick(8192, 8192, 8192), "coop_128x256_c2x1");
  // Exactly one full wave (132 tiles): nothing to gain by splitting K.
  EXPECT_EQ(pick(128 * 12, 256 * 11, 8192), "coop_128x256_c2x1");
  // 224 tiles are 1.7 waves (85%): stream-K spreads the K blocks evenly.
  EXPECT_EQ(pick(2048, 3584, 8192), "streamk_128x256_c2x1");
  // Fewer SMs (the rest left to communication) change the waves, so the costs.
  const ConfigInfo& coop = configs()[*find_config("coop_128x256_c2x1")];
  EXPECT_GT(estimated_cost(coop, 8192, 8192, 8192, 1, 100), estimated_cost(coop, 8192, 8192, 8192, 1, kH100Sms));
  // A batch of L multiplies the tiles.
  EXPECT_DOUBLE_EQ(estimated_cost(coop, 4096, 4096, 4096, 2, kH100Sms), estimated_cost(coop, 8192, 4096, 4096, 1, kH100Sms));
}

// Configurations not calibrated for the rule (in_rule false) are left to the measured choice:
// the rule never returns one, on any shape or SM count.
TEST(Sm90Config, RuleNeverPicksAMeasuredOnlyConfiguration) {
  bool any = false;
  for (const ConfigInfo& c : configs()) any |= !c.in_rule;
  EXPECT_TRUE(any) << "expected at least one configuration only the measured choice picks";
  for (int64_t m : {int64_t(1), int64_t(128), int64_t(512), int64_t(777), int64_t(4096), int64_t(16384)})
    for (int64_t n : {int64_t(8), int64_t(1424), int64_t(8192)})
      for (int64_t k : {int64_t(8), int64_t(1688), int64_t(8192)})
        for (int sms : {1, 66, kH100Sms})
          EXPECT_TRUE(configs()[choose_config(m, n, k, 1, sms)].in_rule) << m << "x" << n << "x" << k << " sms=" << sms;
}

// The constants as calibrated on H200 (132 SMs; bench/results/2026-11-22-gemm-core): on the
// benchmark's local matmuls the rule picks the configuration measured fastest, or within 3% of it.
TEST(Sm90Config, RulePicksTheMeasuredConfigurationsOnTheBenchmarkShapes) {
  struct Case { int64_t m, n, k; const char* want; };
  const Case cases[] = {
      {4096, 8192, 8192, "coop_128x256_c2x1"},  {8192, 8192, 8192, "coop_128x256_c2x1"},
      {16384, 8192, 8192, "coop_128x256_c2x1"}, {16384, 3584, 8192, "coop_128x256_c2x1"},
      {2048, 3584, 8192, "streamk_128x256_c2x1"}, {512, 8192, 8192, "coop_128x256_c2x1"},
      {4096, 8192, 2048, "pingpong_128x128_c1x2"}, {8192, 8192, 2048, "pingpong_128x128_c1x2"},
      {16384, 8192, 2048, "pingpong_128x128_c1x2"}, {16384, 8192, 7168, "coop_128x256_c2x1"},
      {512, 8192, 2048, "pingpong_128x128_c1x2"},
  };
  for (const Case& c : cases)
    EXPECT_STREQ(configs()[choose_config(c.m, c.n, c.k, 1, kH100Sms)].name, c.want) << c.m << "x" << c.n << "x" << c.k;
}

// The fused kernel's swizzle on the shared AllGather+GEMM shapes (W=4 and 2): never one that
// pads the tile grid, never more clusters along M than one rank's block holds.
// NOTE [measured core config]: the lowest median wins; the rule's configuration keeps a tie
// within 1%; one slow round does not move the pick.
TEST(Sm90Config, MeasuredChoiceTakesTheLowestMedianAndKeepsTheRuleWithinOnePercent) {
  using T = TimedConfig;
  EXPECT_EQ(fastest_config({T{0, {1.00f, 1.00f, 1.00f}}, T{2, {0.90f, 0.91f, 0.95f}}}, 0), 2);
  EXPECT_EQ(fastest_config({T{0, {1.00f, 1.00f, 1.00f}}, T{2, {0.995f, 0.995f, 0.995f}}}, 0), 0);  // a tie: the rule
  EXPECT_EQ(fastest_config({T{0, {1.00f, 1.00f, 1.00f}}, T{2, {0.995f, 0.995f, 0.995f}}}, 1), 2);  // rule not timed
  EXPECT_EQ(fastest_config({T{0, {1.00f, 1.00f, 1.00f}}, T{3, {0.80f, 5.0f, 0.81f}}}, 0), 3);  // a slow round
  EXPECT_EQ(fastest_config({T{0, {1.0f, 1.5f, 1.6f}}, T{1, {1.2f, 1.2f, 1.2f}}}, 1), 1);  // medians, not minima
  EXPECT_EQ(fastest_config({}, 2), -1);
}

TEST(Sm90Config, ChunkWaitSwizzleNeverPadsTheTileGrid) {
  EXPECT_EQ(chunk_wait_swizzle(16384, 3584, 4096), 2);  // 14 tile columns
  EXPECT_EQ(chunk_wait_swizzle(2048, 3584, 512), 2);
  EXPECT_EQ(chunk_wait_swizzle(16384, 8192, 4096), 8);
  EXPECT_EQ(chunk_wait_swizzle(8192, 8192, 2048), 8);
  EXPECT_EQ(chunk_wait_swizzle(4096, 8192, 1024), 4);   // 4 cluster rows per block
  EXPECT_EQ(chunk_wait_swizzle(512, 8192, 128), 1);     // M=512 has 2 cluster rows: 4 would pad
  EXPECT_EQ(chunk_wait_swizzle(4000, 2056, 1000), 1);   // 9 tile columns
}

// TPGEMM_SM90_SWIZZLE: a power of two up to 8, or the caller's default; anything else names the
// variable and what it takes.
TEST(Sm90Config, SwizzleSettingTakesPowersOfTwoAndRefusesTheRest) {
  const char* saved = std::getenv("TPGEMM_SM90_SWIZZLE");
  const std::string kept = saved ? saved : "";
  ::unsetenv("TPGEMM_SM90_SWIZZLE");
  EXPECT_EQ(swizzle_setting(4), 4);
  for (const char* v : {"1", "2", "4", "8"}) {
    ::setenv("TPGEMM_SM90_SWIZZLE", v, 1);
    EXPECT_EQ(swizzle_setting(1), std::atoi(v));
  }
  for (const char* v : {"3", "6", "0", "16", "two"}) {
    ::setenv("TPGEMM_SM90_SWIZZLE", v, 1);
    try {
      swizzle_setting(1);
      ADD_FAILURE() << "TPGEMM_SM90_SWIZZLE=" << v << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("TPGEMM_SM90_SWIZZLE"), std::string::npos) << e.what();
    }
  }
  if (saved) ::setenv("TPGEMM_SM90_SWIZZLE", kept.c_str(), 1);
  else ::unsetenv("TPGEMM_SM90_SWIZZLE");
}

TEST(Sm90Config, FusedTilesOneWaveCountsClustersOfTwoTileRows) {
  EXPECT_TRUE(fused_tiles_one_wave(512, 8192, 1, 132));     // 4 x 32 = 128 tiles
  EXPECT_FALSE(fused_tiles_one_wave(512, 8192, 2, 132));    // two batch entries: 256
  EXPECT_FALSE(fused_tiles_one_wave(640, 8192, 1, 132));    // 5 tile rows pad to 6: 192
  EXPECT_FALSE(fused_tiles_one_wave(2048, 3584, 1, 132));   // 16 x 14 = 224
  EXPECT_TRUE(fused_tiles_one_wave(1024, 1024, 1, 132));
}

// The fused reductions' tiles per unit: the most of 8, 4, 2 that makes 256 units, as measured
// (M x 8192 at W=2: 32 tile columns).
TEST(TileReduceGroup, TakesTheMostTilesThatStillMake256Units) {
  EXPECT_EQ(ops::tile_reduce_group(1, 8, 32), 2);     // M=1024: 128 units of 2 (1 tile: never)
  EXPECT_EQ(ops::tile_reduce_group(1, 16, 32), 2);    // M=2048: 256 units of 2
  EXPECT_EQ(ops::tile_reduce_group(1, 32, 32), 4);    // M=4096: 256 units of 4
  EXPECT_EQ(ops::tile_reduce_group(1, 64, 32), 8);    // M=8192: 256 units of 8
  EXPECT_EQ(ops::tile_reduce_group(2, 32, 32), 8);    // batches count
  EXPECT_EQ(ops::tile_reduce_group(1, 64, 9), 2);     // 9 tile columns: 4 make 64 x 3 = 192 units, 2 make 320
  EXPECT_EQ(ops::tile_reduce_group(1, 1, 1), 2);
}

// A receive slot holds every row its owner sums: gemm_rs's block of M/W rows; gemm_ar's tile rows
// s = j W + owner (NOTE [tile all-reduce]), the last owner's last one possibly cut at M.
TEST(TileReduceSlots, HoldEveryTileRowTheirOwnerSums) {
  EXPECT_EQ(ops::tile_reduce_slot_rows(false, 4096, 4), 1024);
  for (int world = 1; world <= 8; ++world)
    for (int64_t m : {int64_t(1), int64_t(127), int64_t(128), int64_t(201), int64_t(1000), int64_t(8200)}) {
      const int64_t m_tiles = (m + ops::kTileReduceM - 1) / ops::kTileReduceM;
      const int64_t rows = ops::tile_reduce_slot_rows(true, m, world);
      EXPECT_EQ(rows % ops::kTileReduceM, 0) << m << " W=" << world;
      for (int64_t s = 0; s < m_tiles; ++s) EXPECT_LE((s / world + 1) * ops::kTileReduceM, rows) << m << " W=" << world;
      // and no more than the most tile rows an owner has
      EXPECT_EQ(rows / ops::kTileReduceM, (m_tiles + world - 1) / world) << m << " W=" << world;
    }
}

}  // namespace
}  // namespace tpgemm::gemm::sm90
