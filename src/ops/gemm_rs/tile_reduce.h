// The reduction side of the fused GEMM+ReduceScatter (src/ops/gemm_rs/fused.cpp).
//
// NOTE [tile reduce]
// Every rank's GEMM writes its whole partial product P_q [L, M, N] into its symmetric buffer and
// raises a flag per 128 x 256 tile as it lands (NOTE [tile signal] in gemm/sm90/kernels.h). This
// rank owns rows [rank * M/W, (rank + 1) * M/W): its units are the tiles of those rows, in the
// order the GEMMs finish them (NOTE [tile order]). For each unit a block waits until all W ranks
// have raised the tile's flag, sums the W tiles in fp32 in rank order 0..W-1 (bitwise the same
// result every run, as the pipelined reduction), adds beta * C and stores the tile of D.
//
// Units are handed out by a ticket counter in this rank's control words, so that two launches of
// the same kernel share them: one beside the GEMM, on the SMs it leaves free (as many blocks as
// SMs, so it can never take an SM the persistent GEMM's grid is waiting for), and one after the
// GEMM on the caller's stream, on every SM, for the tiles of the last wave. Control words, all
// only growing (no reset, CUDA-graph safe):
//   [0] seq: the call's sequence number, bumped by launch_begin_call() before the GEMM;
//   [1] tickets handed out over all calls: call seq's are [(seq - 1) U, seq U) for U units;
//   [2] units finished over all calls. The block that finishes unit seq * U of all calls tells
//       every peer q, by raising slot `rank` of q's free flags to seq, that this rank has read
//       q's partial products of the call (q's next GEMM overwrites them only then).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "comm/device/wait_env.h"
#include "tpgemm/types.h"

namespace tpgemm::ops {

constexpr int64_t kTileReduceM = 128, kTileReduceN = 256;  // the fused kernel's tile (gemm/sm90 coop 128x256)

struct TileReduceArgs {
  void* const* partial = nullptr;  // device table: every rank's partial products [L, M, N]
  void* const* signals = nullptr;  // device table: every rank's [tile flags][W free flags], uint64
  uint64_t* control = nullptr;     // this rank's control words (above)
  void* d = nullptr;               // the caller's D [L, M/W, N]
  const void* c = nullptr;         // optional, D's shape: D = sum + beta * C
  float beta = 0.0f;
  int64_t m = 0, n = 0, l = 1;
  int64_t m_tiles = 0, n_tiles = 0;  // tiles covering M x N: the flags are [L][m_tiles][n_tiles]
  int64_t units = 0;                 // per call: this rank's tiles, L x (M / W / 128) x n_tiles
  int world = 1, rank = 0;
  comm::WaitEnv env;
};

// Loads both kernels now (NOTE [lazy loading]): they run beside a GEMM that waits for peers.
void preload_tile_reduce(DType dtype, int world);
// control[0] += 1, on `stream`: the call's sequence number.
void launch_begin_call(uint64_t* control, cudaStream_t stream);
void launch_tile_reduce(const TileReduceArgs& args, DType dtype, int blocks, cudaStream_t stream);

}  // namespace tpgemm::ops
