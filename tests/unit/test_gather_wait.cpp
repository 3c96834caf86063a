// The fused AllGather+GEMM's arrival bookkeeping (NOTE [chunk wait] in gemm/sm90/kernels.h),
// checked on the CPU against brute force: the split of K into pieces, that the kernel lets a
// tile's k-tile go exactly when the pulls have delivered those columns of every row it reads,
// and the tile scheduler's orders (NOTE [tile order]).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {
namespace {

TEST(GatherWait, PiecesPartitionTheKTilesAndAgreeWithPieceOfTile) {
  for (int64_t k_tiles = 1; k_tiles <= 300; ++k_tiles)
    for (int pieces = 1; pieces <= 16 && pieces <= k_tiles; ++pieces) {
      ASSERT_EQ(gather_k_piece_begin(0, k_tiles, pieces), 0);
      ASSERT_EQ(gather_k_piece_begin(pieces, k_tiles, pieces), k_tiles);
      for (int j = 0; j < pieces; ++j) {
        const int64_t b = gather_k_piece_begin(j, k_tiles, pieces), e = gather_k_piece_begin(j + 1, k_tiles, pieces);
        ASSERT_LT(b, e) << "k_tiles=" << k_tiles << " pieces=" << pieces << " j=" << j << ": an empty piece";
        for (int64_t kt = b; kt < e; ++kt) ASSERT_EQ(gather_k_piece_of_tile(kt, k_tiles, pieces), j);
      }
    }
  EXPECT_EQ(chunk_wait_k_tiles(8192), 128);
  EXPECT_EQ(chunk_wait_k_tiles(200), 4);  // the last k-tile is partial
}

// The host's pulls (ops/ag_gemm/fused.cpp): stage s = 1 .. W-1 pulls rank (rank + s) mod W's
// block piece by piece in order (each piece a range of K columns of every row), raising the
// stage's flag to seq[j] after piece j. `done[s - 1]` pieces of stage s have landed: is
// (row, k-tile kt) in place?
bool arrived(const ChunkWait& c, int64_t k_tiles, const std::vector<int>& done, int64_t row, int64_t kt) {
  const int src = static_cast<int>(row / c.rows_per_rank), stage = (src - c.rank + c.world) % c.world;
  if (stage == 0) return true;  // own rows: in place at launch
  for (int j = 0; j < done[stage - 1]; ++j)
    if (gather_k_piece_begin(j, k_tiles, c.pieces) <= kt && kt < gather_k_piece_begin(j + 1, k_tiles, c.pieces))
      return true;
  return false;
}

// What the kernel's load warp does before k-tile kt of a tile (chunk_wait_mainloop.cuh): wait,
// for each part of the tile's rows, until its stage's flag reaches seq[piece of kt].
bool released(int64_t row0, int64_t row1, int64_t kt, int64_t k_tiles, const ChunkWait& c,
              const std::vector<int>& done) {
  row1 = std::min(row1, c.rows_per_rank * c.world);
  const int j = gather_k_piece_of_tile(kt, k_tiles, c.pieces);
  for (int64_t row = row0; row < row1;) {
    const GatherPart p = gather_part(row, row1, c);
    if (p.src != static_cast<int>(row / c.rows_per_rank) || p.end <= row) return false;  // malformed part
    if (p.stage > 0 && done[p.stage - 1] <= j) return false;  // flag < seq[j]
    row = p.end;
  }
  return true;
}

// For random shapes and random progress of every stage: a tile's k-tile is released exactly
// when every row of the tile has that k-tile's columns in place (never before: no stale read;
// never later: no needless wait), and everything is released once every piece has landed.
TEST(GatherWait, AKTileIsReleasedExactlyWhenItsColumnsOfEveryRowHaveArrived) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 1500; ++trial) {
    ChunkWait c;
    c.world = 1 + static_cast<int>(rng() % 8);
    c.rank = static_cast<int>(rng() % c.world);
    c.rows_per_rank = 1 + static_cast<int64_t>(rng() % 300);
    const int64_t k_tiles = 1 + static_cast<int64_t>(rng() % 40);
    c.pieces = 1 + static_cast<int>(rng() % std::min<int64_t>(8, k_tiles));
    const int64_t m = c.rows_per_rank * c.world;
    const int64_t tile = int64_t{1} << (4 + rng() % 4);  // 16 .. 128 rows
    std::vector<int> done(static_cast<size_t>(std::max(c.world - 1, 1)));
    const bool all = trial % 5 == 0;
    for (int& d : done) d = all ? c.pieces : static_cast<int>(rng() % (c.pieces + 1));
    for (int64_t row0 = 0; row0 < m + tile; row0 += tile)  // padded tiles past M too
      for (int64_t kt = 0; kt < k_tiles; ++kt) {
        bool there = true;
        for (int64_t r = row0; r < std::min(row0 + tile, m); ++r) there = there && arrived(c, k_tiles, done, r, kt);
        ASSERT_EQ(released(row0, row0 + tile, kt, k_tiles, c, done), there)
            << "W=" << c.world << " rank=" << c.rank << " rows/rank=" << c.rows_per_rank << " pieces=" << c.pieces
            << " k_tiles=" << k_tiles << " tile@" << row0 << "+" << tile << " kt=" << kt;
        if (all) { ASSERT_TRUE(there); }
      }
  }
}

// The scheduler's rotation (ordered_tile_row with first_row = this rank's first row, as the kernel's
// 128-row tiles in clusters of 2 use them): a permutation of the real tile rows that leaves
// padded rows alone, starts on a tile inside this rank's rows, and serves tile rows in arrival
// order: the latest stage a tile row waits for never decreases along the order.
TEST(GatherWait, TheRotationIsAPermutationServedInArrivalOrder) {
  std::mt19937 rng(11);
  constexpr int64_t kTile = 128, kCluster = 2;
  for (int trial = 0; trial < 3000; ++trial) {
    ChunkWait c;
    c.world = 1 + static_cast<int>(rng() % 8);
    c.rank = static_cast<int>(rng() % c.world);
    c.rows_per_rank = 1 + static_cast<int64_t>(rng() % 2000);
    const int64_t m = c.rows_per_rank * c.world;
    const int64_t m_tiles = (m + kTile * kCluster - 1) / (kTile * kCluster) * kCluster;
    TileRowOrder order;
    order.first_row = c.rank * c.rows_per_rank;
    std::vector<int> seen(static_cast<size_t>(m_tiles), 0);
    int last_stage = 0;
    for (int64_t served = 0; served < m_tiles; ++served) {
      const int64_t row = ordered_tile_row(order, served, kTile, m_tiles);
      ASSERT_GE(row, 0);
      ASSERT_LT(row, m_tiles);
      ++seen[static_cast<size_t>(row)];
      if (row * kTile >= m) continue;  // a cluster's padding tile past M: no rows, no wait
      int stage = 0;  // the latest stage among the tile's rows (0: all its rows are this rank's)
      for (int64_t r = row * kTile; r < std::min((row + 1) * kTile, m);) {
        const GatherPart p = gather_part(r, std::min((row + 1) * kTile, m), c);
        stage = std::max(stage, p.stage);
        r = p.end;
      }
      if (served == 0 && c.rows_per_rank >= 2 * kTile) {
        ASSERT_EQ(stage, 0) << "the first tile is not all own rows";
      }
      ASSERT_GE(stage, last_stage) << "W=" << c.world << " rank=" << c.rank << " rows/rank=" << c.rows_per_rank
                                   << ": tile row " << row << " (served " << served << ") waits for an earlier stage";
      last_stage = stage;
    }
    for (int64_t t = 0; t < m_tiles; ++t) ASSERT_EQ(seen[static_cast<size_t>(t)], 1) << "tile row " << t;
    ASSERT_EQ(ordered_tile_row(order, m_tiles + 3, kTile, m_tiles), m_tiles + 3);  // swizzle padding stays put
  }
}

// The interleave (the fused gemm_rs): a permutation of the tile rows that deals them to the
// owners in turn, each owner's rows in increasing order, so that after any prefix of the order
// no owner is more than one tile row ahead of another; padded rows stay put.
TEST(TileOrder, InterleaveDealsEveryOwnersRowsInTurn) {
  for (int ways : {1, 2, 3, 4, 8})
    for (int64_t per_way : {1, 2, 5, 8}) {
      TileRowOrder o;
      o.ways = ways;
      o.way_rows = per_way * 128;
      const int64_t real = ways * per_way, m_tiles = (real + 1) / 2 * 2;  // padded to clusters of 2
      std::vector<int> seen(static_cast<size_t>(m_tiles), 0);
      std::vector<int64_t> done(static_cast<size_t>(ways), 0);  // tile rows served per owner
      for (int64_t served = 0; served < m_tiles; ++served) {
        const int64_t row = ordered_tile_row(o, served, 128, m_tiles);
        ASSERT_GE(row, 0);
        ASSERT_LT(row, m_tiles);
        ++seen[static_cast<size_t>(row)];
        if (row >= real) {
          ASSERT_EQ(row, served) << "a padding row moved";
          continue;
        }
        const int64_t owner = row / per_way;
        ASSERT_EQ(row % per_way, done[static_cast<size_t>(owner)]) << "owner " << owner << "'s rows out of order";
        ++done[static_cast<size_t>(owner)];
        const auto [lo, hi] = std::minmax_element(done.begin(), done.end());
        ASSERT_LE(*hi - *lo, 1) << "ways=" << ways << " per_way=" << per_way << " served=" << served;
      }
      for (int64_t t = 0; t < m_tiles; ++t) ASSERT_EQ(seen[static_cast<size_t>(t)], 1) << "tile row " << t;
    }
}

// The kernel's lookup (TileRowPermutation, its divisions done once on the host) against the
// order's definition evaluated directly in 64-bit arithmetic: rotation from the first tile row at
// or after first_row, or the interleave of `ways` blocks; rows past the blocks and padding stay.
TEST(TileOrder, ThePrecomputedPermutationIsTheOrdersDefinition) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 2000; ++trial) {
    const int64_t tile_m = 128;
    const int64_t m_tiles = 1 + static_cast<int64_t>(rng() % 600);
    TileRowOrder o;
    if (rng() % 2) {
      o.ways = 2 + static_cast<int>(rng() % 7);
      o.way_rows = static_cast<int64_t>(rng() % (m_tiles / o.ways + 1)) * tile_m;
    } else {
      o.first_row = static_cast<int64_t>(rng() % static_cast<uint32_t>(m_tiles * tile_m));
    }
    const TileRowPermutation perm = TileRowPermutation::make(o, tile_m, m_tiles);
    for (int64_t served = 0; served < m_tiles + 4; ++served) {
      int64_t expected = served;
      if (served < m_tiles && o.ways > 1) {
        const int64_t per_way = o.way_rows / tile_m;
        if (served < o.ways * per_way) expected = served % o.ways * per_way + served / o.ways;
      } else if (served < m_tiles) {
        expected = (served + (o.first_row + tile_m - 1) / tile_m % m_tiles) % m_tiles;
      }
      ASSERT_EQ(perm(static_cast<int32_t>(served)), expected)
          << "m_tiles=" << m_tiles << " ways=" << o.ways << " way_rows=" << o.way_rows << " first_row=" << o.first_row
          << " served=" << served;
    }
  }
}

}  // namespace
}  // namespace tpgemm::gemm::sm90
