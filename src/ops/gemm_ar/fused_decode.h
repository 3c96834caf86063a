// The fused GEMM+AllReduce's latency path for decode-sized M (NOTE [fused decode]); the kernel is
// in fused_decode_kernel.cu (it is built with CuTe, in tpgemm_sm90_kernels), its plan in
// fused_decode.cpp.
//
// NOTE [fused decode]
// For M up to 256 rows (where they are not whole 128-row tiles per rank: plan::fused_ar_decode),
// one kernel does the whole op, one-shot style. Each block computes tiles
// of this rank's partial product alpha * A B, decode_tile_m(M) x 64 each, with Ampere-style
// tensor-core instructions (mma.sync, fed by cp.async and ldmatrix: at a few rows the matmul is
// a stream of B), rounds the tile to the output type and stores it, through shared memory, into
// slot `rank` of every rank's staging (NVLink stores; the data is its own flag, NOTE [empty
// lanes]). Once all its tiles are pushed, the block sums them from the W slots of its own staging
// in rank order 0..W-1 (fp32: the same bits on every rank), adds this rank's beta * C and stores
// D. One launch, no event, no second stream.
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
// Measured (W=2, 2026-11-22, bench/results/2026-11-22-tuning/decode-h200x2) it is correct and
// slow: M=16 x 8192 x 2048 0.036-0.041 ms against gemm_oneshot's 0.022-0.024, and its time grows
// with the bytes of B its tiles read (M=32 0.063, M=64 0.10-0.11: each 16-row tile reads all of
// B again), as if B streamed at about 1.4 TB/s. Reading 128 columns of K per stage instead of 64,
// splitting K across more blocks, or 16 x 32 tiles reading 512 bytes of each row of B per stage,
// changed nothing or made it slower. Taken apart (call8 there), the exchange alone takes 14 us a
// call at M=16, launch included, and the matmul alone 36: the matmul is what is slow. Starting
// each tile's K loop at a different k-tile, so that the blocks do not all read the same columns
// of A at once, took M=16 from 0.038 to 0.032 ms (call9). The planner never picks it;
// impl=fused asks for it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/allreduce/symm_collective.h"
#include "tpgemm/types.h"

namespace tpgemm::ops {

constexpr int64_t kDecodeTileN = 64, kDecodeTileK = 64;
// Rows per tile: 128 where M is a multiple of 128 (B streams once), else 16.
constexpr int decode_tile_m(int64_t m) { return m % 128 == 0 ? 128 : 16; }

struct FusedDecodeArgs {
  const void* a = nullptr;  // [L, M, K]
  const void* b = nullptr;  // [L, N, K] (BLayout::kNK)
  float alpha = 1.0f;
  int64_t m = 0, n = 0, k = 0, l = 1;
  // The all-reduce's part, as the one-shot kernel's: `stage` holds 2 halves x W slots of [L, M, N],
  // `calls` one counter per block, `out` is D, `count` = L x M x N.
  SymmCollectiveArgs ar;
};

// The kernel for a dtype, world size and tile height (launched with one FusedDecodeArgs,
// kFusedDecodeThreads threads per block), and the dynamic shared memory it needs.
constexpr int kFusedDecodeThreads = 128;
const void* fused_decode_fn(DType dtype, int world, int tile_m);
int fused_decode_smem_bytes(int tile_m);

}  // namespace tpgemm::ops
