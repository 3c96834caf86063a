// What a device-side wait needs to bound itself and to report who waited on whom. Plain data,
// shared by host and device code.
#pragma once

#include <cstdint>

namespace tpgemm::comm {

enum class WaitSite : int32_t {
  kNone = 0,
  kBarrier,          // index = barrier number within the call
  kArriveFlag,       // a peer's partial products have landed in my receive slot (index = piece)
  kReadyFlag,        // a peer's reduced rows are ready to pull (index = round)
  kAllReduceStart,   // a peer's all-reduce input is ready
  kAllReduceMiddle,  // two-shot: a peer's reduced slice is ready
  kGatherPiece,      // fused ag_gemm: a piece of a peer's A rows has been pulled (index = piece)
  kShardReady,       // the ladder's ag_gemm rungs: a peer's A shard is in its gathered buffer
  kGatheredChunk,    // threadload_gather: another block of this GPU has gathered a chunk (index = chunk)
  kTileFlag,         // fused gemm_rs: this GPU's GEMM has stored a tile (index = unit)
  kTilePush,         // fused gemm_rs: a peer has pushed its partial products of my rows (data as flag)
  kAllGatherBlock,   // the all-gather kernel: a peer's block has been stored into my staging (data as flag)
  kReduceScatterStart,  // the reduce-scatter kernel: a peer's partial of my slice is ready (data as flag)
  kTileGather,          // fused gemm_ar: a peer has pushed me the sums of its rows (data as flag)
  kDecodeTile,          // fused gemm_ar, decode path: a peer has pushed me its partial of a tile (data as flag)
  kDecodeSum,           // fused gemm_ar, decode path, two-shot: a tile's owner has pushed me its sum (data as flag)
  kRowsPushed,          // pipelined ag_gemm: a peer has pushed a chunk of its A rows into my gathered buffer (index = chunk)
};
const char* to_string(WaitSite s);

// NOTE [timeout record]
// Host-mapped (pinned) memory, one per team. The first wait that runs out of time claims
// `tripped` (device memory, read cheaply by every later wait on this GPU so that they give up
// at once instead of each timing out in turn), fills the record, and writes `code` last.
// The host reads it in Team::check() and at the start of every call, and throws
// Error(Timeout) with rank, peer, site, expected and seen values.
struct TimeoutRecord {
  int32_t code;  // 0: none; 1: timed out (written last by the device, after a fence; read first, acquire, by the host)
  int32_t rank;
  int32_t peer;
  int32_t site;
  int32_t index;
  int32_t pad;
  uint64_t expected;
  uint64_t seen;
  uint64_t waited_ns;
};

struct WaitEnv {
  TimeoutRecord* record = nullptr;  // device view of the host-mapped record
  int32_t* tripped = nullptr;       // device memory, 0 until some wait on this GPU failed
  uint64_t timeout_ns = 0;
  int32_t rank = 0;
};

}  // namespace tpgemm::comm
