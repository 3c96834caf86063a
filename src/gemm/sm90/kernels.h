// The boundary between tpgemm and the CUTLASS kernels: plain arguments and one table of
// functions per kernel, so that only the src/gemm/sm90/*.cu files include CUTLASS (and each
// compiles one configuration, in parallel with the others).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "comm/device/wait_env.h"

namespace tpgemm::gemm::sm90 {

// NOTE [chunk wait]
// The fused AllGather+GEMM's kernel (src/ops/ag_gemm/fused.cpp) multiplies a gathered A whose
// rows arrive while it runs. A's M rows are W blocks of rows_per_rank, block q being rank q's
// shard. This rank's own block (rank) is in place at launch; block (rank + s) mod W, stage
// s = 1 .. W-1, is pulled in `pieces` pieces of columns: piece j is every row of the block, K
// columns [gather_k_piece_begin(j) * kChunkWaitTileK, gather_k_piece_begin(j + 1) * ...). A
// stage's pieces are pulled in order, and after piece j the copy stream raises the stage's flag,
// flag + (s - 1) * flag_stride, to seq[j]. Flags only grow (sequence numbers of the plan's
// epoch, NOTE [schedule model]), so no reset is ever needed. How the pieces of different stages
// interleave is the host's choice: the kernel relies only on the order within a stage.
// The tile scheduler (sm90/ordered_scheduler.cuh, rotated) starts each rank on its own rows and walks
// the blocks in stage order; the CTA's load warp (sm90/chunk_wait_mainloop.cuh) waits before
// it loads the first k-tile of each piece, so a tile multiplies the columns that have arrived
// while later ones are still on their way (which is what a GEMM of one wave needs: there every
// tile starts at once).
//
// NOTE [own rows in place]
// Block `rank` of the gathered A is this rank's own shard: it is in place in the caller's A
// before the call, and the host copies it into G only for the peers to pull. With own_in_place,
// the load warp reads a tile of the own block straight from the caller's A (Args::own_a, packed
// [L, rows_per_rank, K]) through a second TMA descriptor, so the kernel need not wait for that
// copy (tens of us at the large shapes). rows_per_rank is then a multiple of kChunkWaitTileM:
// no tile straddles the own block and a peer's.
struct ChunkWait {
  const uint64_t* flag = nullptr;  // stage 1's flag; null: a plain GEMM, nothing to wait for
  int64_t flag_stride = 0;         // elements from one stage's flag to the next's
  const uint64_t* seq = nullptr;   // seq[piece]: the value a piece's flag carries in this call
  int rank = 0;
  int world = 1;
  int pieces = 1;  // at most the number of k-tiles, chunk_wait_k_tiles(K)
  int64_t rows_per_rank = 0;
  bool own_in_place = false;  // NOTE [own rows in place]
  comm::WaitEnv env{};
};

#if defined(__CUDACC__)
#define TPGEMM_HD __host__ __device__
#else
#define TPGEMM_HD
#endif

// The extents of the chunk-waiting kernel's tiles: pieces are whole k-tiles, and the own block
// read in place is whole tile rows.
constexpr int64_t kChunkWaitTileM = 128, kChunkWaitTileK = 64;
TPGEMM_HD constexpr int64_t chunk_wait_k_tiles(int64_t k) { return (k + kChunkWaitTileK - 1) / kChunkWaitTileK; }

// The k-tiles [0, k_tiles) split into `pieces` (1 <= pieces <= k_tiles) near-equal, non-empty
// runs: piece j starts at gather_k_piece_begin(j), and k-tile kt is in piece
// gather_k_piece_of_tile(kt), the j with begin(j) <= kt < begin(j + 1).
TPGEMM_HD constexpr int64_t gather_k_piece_begin(int64_t j, int64_t k_tiles, int pieces) { return j * k_tiles / pieces; }
TPGEMM_HD constexpr int gather_k_piece_of_tile(int64_t kt, int64_t k_tiles, int pieces) {
  return static_cast<int>(((kt + 1) * pieces - 1) / k_tiles);
}

// The part of A's rows [row, row1) that lies in one block (0 <= row < M): rows [row, end),
// from rank `src`, at `stage` (0: this rank's own). A tile's k-tile kt is in place once, for
// each of its parts of stage > 0, the stage's flag reaches seq[gather_k_piece_of_tile(kt)].
struct GatherPart {
  int64_t end = 0;
  int src = 0;
  int stage = 0;
};
TPGEMM_HD constexpr GatherPart gather_part(int64_t row, int64_t row1, const ChunkWait& c) {
  const int64_t mw = c.rows_per_rank;
  GatherPart p;
  p.src = static_cast<int>(row / mw);
  p.end = (p.src + 1) * mw < row1 ? (p.src + 1) * mw : row1;
  p.stage = (p.src - c.rank + c.world) % c.world;
  return p;
}

// NOTE [tile order]
// The order in which the persistent tile scheduler (sm90/ordered_scheduler.cuh) serves tile rows:
// the s-th tile row it hands out is ordered_tile_row(s). Two orders, both permutations of the
// real tile rows (rows CUTLASS pads past m_tiles stay where they are):
//   rotation (ways == 1): from the first tile row that starts at or after `first_row`, wrapping
//     around: the fused AllGather+GEMM starts each rank on its own rows (NOTE [chunk wait]) and
//     meets its peers' blocks in stage order (the stage a tile row waits for never decreases);
//   interleave (ways > 1): M is `ways` blocks of `way_rows` rows, whole tile rows each, dealt in
//     turn, tile row j of block 0, of block 1, ..., then j + 1: the fused GEMM+ReduceScatter
//     finishes every owner's rows at the same pace, so that each owner reduces its rows while
//     the GEMM goes on (NOTE [tile signal]).
struct TileRowOrder {
  int64_t first_row = 0;
  int ways = 1;
  int64_t way_rows = 0;
};
// The order with its divisions done once, on the host: every warp of the kernel looks up a tile
// row per tile, on the way from one tile's epilogue to the next tile's mainloop, where 64-bit
// divisions measured several percent of a small-K GEMM.
struct TileRowPermutation {
  int32_t m_tiles = 0;  // tile rows the scheduler serves (M padded to whole clusters)
  int32_t first = 0;    // rotation: the tile row served first
  int32_t ways = 1, per_way = 0;  // interleave: `ways` blocks of `per_way` tile rows
  static constexpr TileRowPermutation make(const TileRowOrder& o, int64_t tile_m, int64_t m_tiles) {
    TileRowPermutation p;
    p.m_tiles = static_cast<int32_t>(m_tiles);
    p.first = static_cast<int32_t>((o.first_row + tile_m - 1) / tile_m % m_tiles);
    p.ways = o.ways;
    p.per_way = o.ways > 1 ? static_cast<int32_t>(o.way_rows / tile_m) : 0;
    return p;
  }
  TPGEMM_HD constexpr int32_t operator()(int32_t served) const {
    if (served >= m_tiles) return served;
    if (ways > 1) return served < ways * per_way ? served % ways * per_way + served / ways : served;
    const int32_t r = served + first;
    return r < m_tiles ? r : r - m_tiles;
  }
};
TPGEMM_HD constexpr int64_t ordered_tile_row(const TileRowOrder& o, int64_t served, int64_t tile_m, int64_t m_tiles) {
  return TileRowPermutation::make(o, tile_m, m_tiles)(static_cast<int32_t>(served));
}

// NOTE [tile signal]
// The fused GEMM+ReduceScatter's kernel (src/ops/gemm_rs/fused.cpp) tells the kernel beside it,
// on the same GPU, which tiles of its output are in place. Once a tile's TMA stores have
// completed, its CTA stores the call's sequence number, *seq, into
// flags[(l * m_tiles + m) * n_tiles + n] (release, GPU scope: the readers are on this GPU; what
// crosses NVLink is their business, NOTE [tile reduce]). Sequence numbers only grow, so flags
// never need a reset.
struct TileSignal {
  uint64_t* flags = nullptr;      // this rank's tile flags; null: a plain GEMM
  const uint64_t* seq = nullptr;  // the call's sequence number (device memory)
  int64_t m_tiles = 0, n_tiles = 0;  // tiles of tile_m x tile_n covering M x N (not padded)
};

// Row-major D[l][m][n] = alpha * A[l][m][k] * op(B[l]) + beta * C[l][m][n]; strides in elements.
struct Args {
  int m = 0, n = 0, k = 0, l = 1;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;  // never null: D stands in for it when there is no C (then beta = 0 and it is not read)
  void* d = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0, ldd = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0, stride_d = 0;
  float alpha = 1.0f, beta = 0.0f;
  int device = 0;
  int sm_count = 0;             // persistent grid: at most this many CTAs
  int max_active_clusters = 0;  // from prepare(); 0 = unknown
  int swizzle = 1;              // tile scheduler: max swizzle (1, 2, 4 or 8)
  int raster = 0;               // 0 heuristic, 1 along M, 2 along N
  ChunkWait wait{};             // used only by the chunk-waiting kernels (NOTE [chunk wait])
  const void* own_a = nullptr;  // with wait.own_in_place: this rank's block of A (NOTE [own rows in place])
  TileRowOrder order{};         // used only by the ordered-scheduler kernels (NOTE [tile order])
  TileSignal signal{};          // used only by the tile-signalling kernels (NOTE [tile signal])
};

// One kernel (configuration x dtype x B layout).
struct KernelFns {
  bool (*implementable)(const Args&);  // CUTLASS's can_implement (alignment, extents); host only
  size_t (*workspace_bytes)(const Args&);  // host only
  // Once per plan, on the current device: raises the kernel's shared-memory limit and returns
  // how many of its clusters fit on the device at once (the persistent grid is sized by it).
  int (*prepare)();
  // Enqueues the kernel. `workspace` holds workspace_bytes(args) bytes (may be null if 0).
  void (*run)(const Args&, void* workspace, cudaStream_t stream);
};

// Per configuration, indexed [dtype][b layout]: dtype 0 bf16, 1 fp16; layout 0 kKN, 1 kNK
// (tpgemm's enum values). A null `run` means not compiled.
struct KernelTable {
  KernelFns fns[2][2];
};

}  // namespace tpgemm::gemm::sm90
