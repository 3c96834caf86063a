// The communication side of the fused GEMM+ReduceScatter and GEMM+AllReduce (src/ops/gemm_rs/fused.cpp).
//
// NOTE [tile reduce]
// This rank's GEMM writes its whole partial product P [L, M, N] into a local buffer and raises
// a local flag per 128 x 256 tile as it lands (NOTE [tile signal] in gemm/sm90/kernels.h), in
// the order NOTE [tile order] deals the tile rows: row j of owner 0, row j of owner 1, ...,
// then j + 1. The units of a call are groups of `group_tiles` tiles of a tile row, in that
// order; for a group of owner o, once its tiles' local flags are up:
//   o != rank, a push: store the group into slot `rank` of o's receive buffer (NVLink stores: the
//     writer never waits on the far side);
//   o == rank, a reduction: sum the W groups (P's own, the receive slots' others: all local
//     reads) in fp32 in rank order 0..W-1 (bitwise the same every run, as the pipelined
//     reduction), add beta * C, store D.
// The pushed data is its own flag, as in the all-reduce kernels (NOTE [empty lanes] in
// ops/allreduce/allreduce_device.cuh): the reduction polls each received vector until no lane is
// empty and empties it after reading, and the receive buffer has two halves used by alternate
// calls (NOTE [two staging halves] in ops/allreduce/symm_collective.h). No fence, no flag
// crosses NVLink: a system-scope fence and flag per 8 tiles made the pushes several times
// slower (docs/perf.md). A push waits only for
// this GPU's GEMM; a reduction of tile row j waits for pushes of tile row j, which every rank
// hands out at the same place in the same order: no circular wait.
//
// Units are handed out by a ticket counter in this rank's control words, so that two launches of
// one kernel share them: one beside the GEMM, on the SMs it leaves free (at most one block per
// such SM, in clusters of 2 like the GEMM's, so that it does not break up a pair of SMs the
// GEMM's grid counted on; the GEMM waits for nothing, so at worst a cluster of it runs late), and
// one after the GEMM on the caller's stream, on every SM, for the last wave's tiles. Control
// words: [0] seq, the call's sequence number, and [1] the tickets taken in this call (one
// atomicAdd each; one at or past the call's U units, 2U for the all-reduce, ends a block), both
// set by launch_begin_call() before the GEMM, when no block of this kernel runs (a kernel on the
// stream: CUDA-graph safe).
//
// NOTE [tile all-reduce]
// GEMM+AllReduce is the reduce-scatter above followed by an all-gather of the sums, in the same
// kernel. Every rank ends with all of D, so which rank sums which rows is free: tile row s of D
// (the last one cut at M, so any M) is owned by rank s mod W, and lands in tile row s / W of each
// of that rank's receive slots (ceil(m_tiles / W) tile rows a slot). The GEMM serves tile rows in
// their plain order, which deals them to the owners in turn as NOTE [tile order]'s interleave
// does for gemm_rs's blocks. D is [L, M, N] on every rank, and the owner of a group, having
// summed it, pushes the rounded sum (the data its own flag again) into the same place of every
// peer's gather buffer [L, M, N]. After the U units above come U gather units, in the same order:
// for a group of owner o != rank, take it from the gather buffer as it lands and empty it. Every rank
// stores the rounded sum + its own beta * C (rounded again, as the two-shot kernel does) in D.
// A gather unit waits for an owner's reduction, which waits only for pushes; every push ticket
// is handed out before any gather ticket, so the smallest unfinished unit of the call always
// progresses (the CPU model in tests/unit/test_allreduce_protocol.cpp deadlocks the other way
// round). -0.0 is stored as +0.0 by the owner too: without C, every rank's D is the same bits.
// The gather buffer needs no second half: an owner pushes a group's sums of call k + 1 to a
// peer only after that peer pushed it the group's partials of call k + 1, so after the peer's
// call-k kernels ended, their emptying stores included (a kernel's end orders its stores).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "comm/device/wait_env.h"
#include "tpgemm/types.h"

namespace tpgemm::ops {

// The fused kernel's tile (signal_coop_128x256_c2x1.cu asserts it).
constexpr int64_t kTileReduceM = 128, kTileReduceN = 256;
// The most tiles of a tile row per unit of work (a unit's fixed costs, its waits and ticket, over
// 8 tiles).
constexpr int64_t kTileReduceGroup = 8;
// Tiles per unit for a call of L x m_tiles x n_tiles tiles: the most of 8, 4 and 2 that still
// makes 256 units (about two per SM, for the launch after the GEMM on every SM): fewer units leave
// SMs idle at the end, smaller ones pay their fixed costs more often (the fused gemm_ar's
// measurements: docs/planner.md, "Kernel knobs"). The fused gemm_rs, the same kernel, follows it.
constexpr int64_t tile_reduce_group(int64_t l, int64_t m_tiles, int64_t n_tiles) {
  int64_t g = kTileReduceGroup;
  while (g > 2 && l * m_tiles * ((n_tiles + g - 1) / g) < 256) g /= 2;
  return g;
}

// Rows of one receive slot: gemm_rs, the owner's block of M/W rows (whole tiles); gemm_ar, the
// tile rows it owns (NOTE [tile all-reduce]).
constexpr int64_t tile_reduce_slot_rows(bool all_reduce, int64_t m, int world) {
  return all_reduce ? ((m + kTileReduceM - 1) / kTileReduceM + world - 1) / world * kTileReduceM : m / world;
}

struct TileReduceArgs {
  const void* partial = nullptr;     // this rank's partial product [L, M, N]
  const uint64_t* tile_flags = nullptr;  // this rank's GEMM tile flags [L][m_tiles][n_tiles]
  void* const* recv = nullptr;       // device table: every rank's receive buffer [2 halves][W][L, slot_rows, N]
  uint64_t* control = nullptr;       // this rank's control words (above)
  void* const* gather = nullptr;     // all-reduce only: every rank's gather buffer [L, M, N]
  void* d = nullptr;                 // the caller's D: [L, M/W, N], or [L, M, N] with `gather`
  const void* c = nullptr;           // optional, D's shape: D = sum + beta * C
  float beta = 0.0f;
  int64_t m = 0, n = 0, l = 1;
  int64_t m_tiles = 0, n_tiles = 0;  // tiles covering M x N, the last ones cut at M and N
  int64_t slot_rows = 0;             // tile_reduce_slot_rows()
  int64_t group_tiles = kTileReduceGroup;  // tiles of a tile row per unit (1 to 8): tile_reduce_group()
  int world = 1, rank = 0;
  bool drop_pushes = false;          // test hook: push nothing (owners must time out naming this rank)
  comm::WaitEnv env;
};

// Loads both kernels now (NOTE [lazy loading]): they run beside a GEMM.
void preload_tile_reduce(DType dtype, int world, bool all_reduce);
// control[0] += 1 (the call's sequence number), control[1] = 0 (its tickets), on `stream`.
void launch_begin_call(uint64_t* control, cudaStream_t stream);
void launch_tile_reduce(const TileReduceArgs& args, DType dtype, int blocks, cudaStream_t stream);

}  // namespace tpgemm::ops
