// The fused GEMM+AllReduce's latency path for decode-sized M (NOTE [fused decode]); the kernel is
// in fused_decode_kernel.cu (it is built with CuTe, in tpgemm_sm90_kernels), its plan in
// fused_decode.cpp.
//
// NOTE [fused decode]
// For M up to 256 rows (where they are not whole 128-row tiles per rank: plan::fused_ar_decode),
// one kernel does the whole op, one-shot style. Each block computes tiles of this rank's partial
// product alpha * A B, decode_tile_m(M) x 64 each, as one warpgroup's wgmma on the transposed
// tile (D^T = B A^T: B's 64 rows are wgmma's M, so a 16-row tile wastes nothing), fed by a ring
// of cp.async stages. It rounds the tile to the output type and stores it, through shared
// memory, into slot `rank` of every rank's staging (NVLink stores; the data is its own flag,
// NOTE [empty lanes]). Once all its tiles are pushed, the block sums them from the W slots of its
// own staging in rank order 0..W-1 (fp32: the same bits on every rank), adds this rank's beta * C
// and stores D. One launch, no event, no second stream.
//
// Nothing waits for anything but pushes, and every push is made before its block waits for any:
// a block that waits holds an SM, so the grid is at most what fits on the GPU at once (it assumes
// the GPU to itself: a kernel beside it that keeps SMs can make the waits run out, reported as a
// timeout), and each block takes the tiles b, b + grid, ... The grids of two ranks may differ.
// The one-shot all-reduce's two staging halves and per-block call counters (NOTE [two staging
// halves]) carry over, by a per-kernel argument rather than its per-block one: every rank reads
// every tile of every peer in each call, so a peer's call e + 2 pushes into a half only after its
// call e + 1 read my call e + 1's pushes, made after my call e (its reads and emptying) ended.
//
// Two-shot (TPGEMM_DECODE_TWO_SHOT=1; not yet the default anywhere): each tile is pushed only to
// its owner, rank t mod W, which sums it as above, pushes the rounded sum into the sums slot of
// every peer's staging and writes its D; the other ranks wait for that sum and write theirs. A
// rank sends 2 (W - 1) / W of D instead of one-shot's W - 1 times D, at the price of a second
// hop; D is the same bits either way (both round the fp32 sum once, then add beta * C). The sums
// wait only on partials, which wait on nothing, so every wait still depends only on pushes made
// before their blocks wait. Half h's sums slot is rewritten by an owner at call e + 2 only after
// it has my call e + 2 partials, sent after my call e (which emptied it) ended; its partial slots
// are refilled by a peer at call e + 2 only after that peer's call e + 1 had my sums of e + 1,
// sent after I read my call e + 1 partials.
//
// Why wgmma: an mma.sync kernel fed by ldmatrix took 23 us for its matmul alone at M = 16 x 8192
// x 2048 on one H200, against cuBLASLt's 8.5,
// though its cp.async loads alone took 9.7. With one warp per scheduler, every ldmatrix -> mma
// dependency and the barrier of each stage stood in the open (ncu: 0.08 instructions issued per
// cycle, stalls on short scoreboard and barrier). wgmma takes a whole stage in four asynchronous
// instructions: 9.2 us at M = 16, 15.6 at M = 128; with one k-tile's wgmma left in flight, 8.2 and
// 13.3. At W=2 the whole op then beat gemm_oneshot and gemm_twoshot up to M = 64 (0.019-0.025 ms
// against 0.023-0.028) and tied at M = 128.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/allreduce/symm_collective.h"
#include "tpgemm/types.h"

namespace tpgemm::ops {

constexpr int64_t kDecodeTileN = 64, kDecodeTileK = 64;
// Rows per tile: the most of 128, 64, 32 and 16 that divides M. Each tile row reads all of B, so
// fewer, taller tile rows read less (on one H200, 64-row tiles took little more than half the time
// of 16-row ones at M = 64).
constexpr int decode_tile_m(int64_t m) {
  return m % 128 == 0 ? 128 : m % 64 == 0 ? 64 : m % 32 == 0 ? 32 : 16;
}

struct FusedDecodeArgs {
  const void* a = nullptr;  // [L, M, K]
  const void* b = nullptr;  // [L, N, K] (BLayout::kNK)
  float alpha = 1.0f;
  int64_t m = 0, n = 0, k = 0, l = 1;
  // The all-reduce's part: `stage` holds 2 halves x (W + 1) slots of [L, M, N] (W partials and,
  // two-shot, the sums), `calls` one counter per block, `out` is D, `count` = L x M x N.
  SymmCollectiveArgs ar;
  bool two_shot = false;  // NOTE [fused decode]: tiles summed by their owners, not by every rank
};

// The kernel for a dtype, world size and tile height (launched with one FusedDecodeArgs,
// kFusedDecodeThreads threads per block), and the dynamic shared memory it needs.
constexpr int kFusedDecodeThreads = 128;
const void* fused_decode_fn(DType dtype, int world, int tile_m);
int fused_decode_smem_bytes(int tile_m);

}  // namespace tpgemm::ops
