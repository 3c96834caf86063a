// The fused AllGather+GEMM's gather by SMs (src/ops/ag_gemm/fused.cpp), for GEMMs of one wave.
//
// NOTE [sm pull]
// In a GEMM of one wave every tile starts at once, so a peer's rows are needed at the start, and
// what counts is how soon the first columns of every block land. The copy engines are slow to
// start: each copy costs about 6 us before its first byte and 3 us more per copy in a row
// (bench/results/2026-11-23-sm-pull/, ce_probe), and the flags, barriers and own-rows copy each
// take one. Here a small kernel on the SMs the GEMM leaves free (a tile per SM: the rest) moves
// everything instead, in units of one slice of rows by one piece of K columns, and raises a flag
// per (stage, piece) that the GEMM's load warp waits on (NOTE [chunk wait], per-piece flags):
//   own unit (s = 0)   my shard (the caller's A) -> my G, after every peer has finished pulling
//                      my rows of the previous call (done[q], below); then published[j] += 1;
//   pull unit (s > 0)  rank (rank + s) mod W's rows, from its G into mine, once its published[j]
//                      counts every slice; then done[rank] += 1 in that rank's pad.
// Every unit then adds 1 to its (s, j) flag in my pad, which the GEMM waits on. Units are handed
// out by a ticket counter, piece by piece: piece j's own units, then its pull units for s = 1 ..
// W - 1. A pull waits only for a peer's own units of the same piece, which that peer handed out
// before any of its pull units of that piece: the smallest unfinished ticket on any rank always
// progresses, with any number of blocks resident (even one), so no residency is assumed.
// Counters only grow: in call e (control[0]) a (stage, piece) flag and published[j] reach
// e * slices, done[q] reaches e * pieces * slices. No reset, graph replays included.
//
// Pad layout (uint64 words, symmetric), W stages, P pieces:
//   [s * P + j]       stage s, piece j landed in my G: slices done (my GEMM waits on it)
//   [W * P + j]       published[j]: slices of my own rows' piece j in my G (peers wait on it)
//   [W * P + P + q]   done[q]: units rank q has pulled from my G
// Control (local): [0] the call's number e, [1] tickets taken, [2 + j] e * slices (the GEMM's
// seq[j]); set by launch_sm_pull_begin() on the caller's stream before the GEMM and this kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "comm/device/wait_env.h"

namespace tpgemm::ops {

struct SmPullArgs {
  const void* a = nullptr;           // my shard [L][M/W][K] (the caller's)
  void* const* g = nullptr;          // every rank's G [L][M][K] (device table)
  void* const* pads = nullptr;       // every rank's pad (device table; layout above)
  uint64_t* control = nullptr;       // mine (layout above)
  int64_t m = 0, k = 0, l = 1, rows_per_rank = 0;
  int64_t elem_bytes = 2;
  int pieces = 1, slices = 1;
  int rank = 0, world = 1;
  bool drop_publish = false;  // test hook: never publish (peers must time out naming this rank)
  comm::WaitEnv env;
};

// Pad words for W ranks and P pieces (layout above); control words for P pieces.
constexpr int64_t sm_pull_pad_words(int world, int pieces) { return int64_t(world + 1) * pieces + world; }
constexpr int64_t sm_pull_control_words(int pieces) { return 2 + pieces; }
constexpr int64_t sm_pull_published(int world, int pieces) { return int64_t(world) * pieces; }
constexpr int64_t sm_pull_done(int world, int pieces) { return int64_t(world + 1) * pieces; }

// Slices of a block's rows per piece: units of about 256 KiB (a round trip's worth of loads for a
// block of 512 threads with 16 vectors each in flight, twice over).
int sm_pull_slices(int64_t rows_per_rank, int64_t l, int64_t k, int pieces, int64_t elem_bytes);

// The pull kernel runs one block of 512 threads per SM, in clusters of this many blocks; its
// grid is a multiple of it.
constexpr int kSmPullCluster = 2;

void preload_sm_pull();  // NOTE [lazy loading]: it runs beside a GEMM that waits on it
void launch_sm_pull_begin(uint64_t* control, int pieces, int slices, cudaStream_t stream);
void launch_sm_pull(const SmPullArgs& args, int blocks, cudaStream_t stream);

}  // namespace tpgemm::ops
