// The rungs of the nvFuser study's ladder (its experimental pull request on GPU-initiated
// communication; docs/design.md, "The ladder"): AllGather+GEMM done by SM threads that read peers' memory,
// from the naive to the two-kernel. tpgemm keeps them to measure fused against; the planner never
// picks one. One implementation per file (naive_remote.cu, threadload_gather.cu,
// gather_then_gemm.cu); the protocol they share is here.
//
// NOTE [ladder protocol]
// G is symmetric, [L][M][K]: every rank's gathered A, each rank's own rows at their global rows.
// One call, rank r, all on the caller's stream:
//   barrier 0          every peer has finished reading my G in the previous call (bumps the epoch)
//   copy engine        my A shard -> G[my rows]
//   copy engine        for every peer q: "r's shard is ready" := seq, written into q's pad
//   the rung's kernel  reads rank q's rows from q's G only after seeing q's flag here; the wait
//                      is bounded and ends in Error(Timeout) naming q (WaitSite::kShardReady)
// Flags carry the epoch's sequence number (NOTE [signal pad layout]), so graph replays and
// repeated calls need no reset. Unlike fused, peers' rows are read by SM loads over NVLink, not
// by the copy engines: that is what the ladder measures.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "comm/device/wait_env.h"
#include "comm/signal_pad.h"
#include "comm/symmetric.h"
#include "ops/op_impl.h"

namespace tpgemm::detail {

// What a rung's kernels see (plain data).
struct LadderArgs {
  const void* const* g_peers = nullptr;  // every rank's G, by rank (device table)
  void* g = nullptr;                     // this rank's G
  const void* b = nullptr;               // [L][N][K] (kNK) or [L][K][N] (kKN)
  const void* c = nullptr;               // [L][M][N] or null
  void* d = nullptr;                     // [L][M][N]
  int64_t m = 0, n = 0, k = 0, l = 1;
  int64_t rows_per_rank = 0;  // M / W: rank q owns global rows [q * M/W, (q + 1) * M/W)
  int rank = 0, world = 1;
  float alpha = 1.0f, beta = 0.0f;
  bool b_kn = false;
  const uint64_t* ready = nullptr;  // slot q: raised by rank q once its shard is in its G
  const uint64_t* seq = nullptr;    // seq[0]: the value this call's flags carry
  comm::WaitEnv env{};
};

class LadderRung : public OpImpl {
 protected:
  // `gemm_core`: the rung runs the Hopper GEMM core (checked before any collective step).
  LadderRung(const ImplContext& ctx, bool gemm_core);
  // NOTE [ladder protocol]'s first three steps, then the kernels' arguments.
  LadderArgs publish_shard(const Operands& o, cudaStream_t stream) const;

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;
  plan::Choice choice_;

 private:
  comm::SymmetricBuffer g_;
  comm::SignalPad pad_;
  bool drop_signals_ = false;
};

// Rows [chunk * kLadderChunkRows, ...) of G form one chunk: the gather's unit of work and of waiting.
constexpr int64_t kLadderChunkRows = 64;
constexpr int64_t ladder_chunks(int64_t m) { return (m + kLadderChunkRows - 1) / kLadderChunkRows; }

}  // namespace tpgemm::detail
