// The fused AllGather+GEMM's arrival bookkeeping (NOTE [chunk wait] in gemm/sm90/kernels.h),
// checked on the CPU against brute force: the piece split, and that a tile the kernel lets go
// after k flags reads only rows that the first k pulls (in the host's order) have delivered.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gemm/sm90/kernels.h"

namespace tpgemm::gemm::sm90 {
namespace {

TEST(GatherWait, PiecesPartitionTheBlockAndAgreeWithPieceOfRow) {
  for (int64_t rows = 1; rows <= 300; ++rows)
    for (int pieces = 1; pieces <= 8 && pieces <= rows; ++pieces) {
      ASSERT_EQ(gather_piece_begin(0, rows, pieces), 0);
      ASSERT_EQ(gather_piece_begin(pieces, rows, pieces), rows);
      for (int j = 0; j < pieces; ++j) {
        const int64_t b = gather_piece_begin(j, rows, pieces), e = gather_piece_begin(j + 1, rows, pieces);
        ASSERT_LT(b, e) << "rows=" << rows << " pieces=" << pieces << " j=" << j << ": an empty piece";
        for (int64_t r = b; r < e; ++r) ASSERT_EQ(gather_piece_of_row(r, rows, pieces), j);
      }
    }
}

// The host's pull order (ops/ag_gemm/fused.cpp): stage s = 1 .. W-1 pulls rank (rank + s) mod W's
// block, piece by piece, and raises round gather_round(s, j). Rows arrived after `k` rounds.
std::vector<bool> arrived_after(const ChunkWait& c, int k) {
  const int64_t mw = c.rows_per_rank;
  std::vector<bool> in(static_cast<size_t>(mw * c.world), false);
  for (int64_t r = 0; r < mw; ++r) in[static_cast<size_t>(c.rank * mw + r)] = true;  // own rows: in place at launch
  for (int s = 1; s < c.world; ++s)
    for (int j = 0; j < c.pieces; ++j) {
      if (gather_round(s, j, c.pieces) >= k) continue;
      const int src = (c.rank + s) % c.world;
      for (int64_t r = gather_piece_begin(j, mw, c.pieces); r < gather_piece_begin(j + 1, mw, c.pieces); ++r)
        in[static_cast<size_t>(src * mw + r)] = true;
    }
  return in;
}

TEST(GatherWait, ATileReleasedAfterKFlagsReadsOnlyArrivedRowsAndEveryTileIsReleasedAtTheEnd) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    ChunkWait c;
    c.world = 1 + static_cast<int>(rng() % 8);
    c.rank = static_cast<int>(rng() % c.world);
    c.rows_per_rank = 1 + static_cast<int64_t>(rng() % 300);
    c.pieces = 1 + static_cast<int>(rng() % std::min<int64_t>(4, c.rows_per_rank));
    const int rounds = (c.world - 1) * c.pieces;
    const int64_t m = c.rows_per_rank * c.world;
    const int64_t tile = int64_t{1} << (4 + rng() % 4);  // 16 .. 128 rows
    for (int k = 0; k <= rounds; ++k) {
      const std::vector<bool> in = arrived_after(c, k);
      for (int64_t row0 = 0; row0 < m + tile; row0 += tile) {  // padded tiles past M too
        const GatherNeed need = gather_need(row0, row0 + tile, c);
        ASSERT_LT(need.round, rounds);
        if (need.round >= k) continue;  // the kernel still waits: nothing to check
        for (int64_t r = row0; r < std::min(row0 + tile, m); ++r)
          ASSERT_TRUE(in[static_cast<size_t>(r)]) << "W=" << c.world << " rank=" << c.rank << " rows/rank="
                                                  << c.rows_per_rank << " pieces=" << c.pieces << " tile@" << row0
                                                  << ": released after " << k << " flags, row " << r << " not there";
        if (need.round >= 0) ASSERT_EQ(need.peer, (need.round / c.pieces + 1 + c.rank) % c.world);
      }
    }
    // Brute force: the need is exactly the latest round among the tile's rows.
    for (int64_t row0 = 0; row0 < m; row0 += tile) {
      int latest = -1;
      for (int k = 1; k <= rounds; ++k) {
        const std::vector<bool> before = arrived_after(c, k - 1);
        for (int64_t r = row0; r < std::min(row0 + tile, m); ++r)
          if (!before[static_cast<size_t>(r)]) latest = k - 1;
      }
      ASSERT_EQ(gather_need(row0, row0 + tile, c).round, latest) << "tile@" << row0;
    }
  }
}

}  // namespace
}  // namespace tpgemm::gemm::sm90
