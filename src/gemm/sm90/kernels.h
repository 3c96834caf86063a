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
// shard; this rank's own block (rank) is in place at launch, and block (rank + s) mod W, for
// stage s = 1 .. W-1, arrives in `pieces` pieces of rows (gather_piece_of_row below). Piece j
// of stage s is in place once *flag >= seq[(s - 1) * pieces + j]: the flag only grows (a
// sequence number of the plan's epoch, NOTE [schedule model]), so no reset is ever needed.
// The tile scheduler (sm90/chunk_wait_scheduler.cuh) starts each rank on its own rows and
// walks the blocks in stage order; the CTA's load warp waits before loading a tile's A.
struct ChunkWait {
  const uint64_t* flag = nullptr;  // null: a plain GEMM, nothing to wait for
  const uint64_t* seq = nullptr;
  int rank = 0;
  int world = 1;
  int pieces = 1;
  int64_t rows_per_rank = 0;
  comm::WaitEnv env{};
};

#if defined(__CUDACC__)
#define TPGEMM_HD __host__ __device__
#else
#define TPGEMM_HD
#endif

// The piece of a block of `rows` rows (0 <= row < rows) that holds `row`, when the block is
// split into `pieces` near-equal pieces; and where piece j starts (the same split, inverted):
// row is in piece j iff gather_piece_begin(j) <= row < gather_piece_begin(j + 1).
TPGEMM_HD constexpr int64_t gather_piece_of_row(int64_t row, int64_t rows, int pieces) { return row * pieces / rows; }
TPGEMM_HD constexpr int64_t gather_piece_begin(int64_t j, int64_t rows, int pieces) {
  return (j * rows + pieces - 1) / pieces;
}

// The index into ChunkWait::seq of piece j of stage s >= 1: pieces are pulled (and their flag
// raised) in this order, stage by stage.
TPGEMM_HD constexpr int gather_round(int stage, int64_t piece, int pieces) {
  return (stage - 1) * pieces + static_cast<int>(piece);
}

// What a tile reading A's rows [row0, row1) waits for: the latest arriving of their pieces, as
// an index into ChunkWait::seq (-1: all the rows are this rank's own), and the rank they come from.
struct GatherNeed {
  int round = -1;
  int peer = -1;
};
TPGEMM_HD constexpr GatherNeed gather_need(int64_t row0, int64_t row1, const ChunkWait& c) {
  const int64_t mw = c.rows_per_rank, m = mw * c.world;
  GatherNeed need;
  if (row1 > m) row1 = m;
  for (int64_t row = row0; row < row1;) {
    const int src = static_cast<int>(row / mw);
    const int64_t end = (src + 1) * mw < row1 ? (src + 1) * mw : row1;
    const int stage = (src - c.rank + c.world) % c.world;
    if (stage > 0) {  // the block's rows come in piece order: its last row here arrives last
      const int round = gather_round(stage, gather_piece_of_row(end - 1 - src * mw, mw, c.pieces), c.pieces);
      if (round > need.round) need = {round, src};
    }
    row = end;
  }
  return need;
}

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
