#include "comm/timeout.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>

#include "core/check.h"
#include "core/env.h"

namespace tpgemm::comm {

const char* to_string(WaitSite s) {
  switch (s) {
    case WaitSite::kNone: return "nothing";
    case WaitSite::kBarrier: return "barrier";
    case WaitSite::kArriveFlag: return "the arrival of partial products";
    case WaitSite::kReadyFlag: return "reduced rows to be ready";
    case WaitSite::kAllReduceStart: return "its all-reduce input to arrive";
    case WaitSite::kAllReduceMiddle: return "its reduced all-reduce slice to arrive";
    case WaitSite::kGatherPiece: return "its rows of A to be gathered (the fused GEMM's tile wait)";
    case WaitSite::kShardReady: return "its A shard to be published for peers to read";
    case WaitSite::kGatheredChunk: return "another block of its own to gather a chunk of A (threadload_gather)";
    case WaitSite::kTileFlag: return "its own GEMM to store a tile (fused gemm_rs)";
    case WaitSite::kTilePush: return "partial products of its rows to be pushed to it (fused gemm_rs, gemm_ar)";
    case WaitSite::kAllGatherBlock: return "its all-gather input to arrive";
    case WaitSite::kReduceScatterStart: return "its reduce-scatter input to arrive";
    case WaitSite::kTileGather: return "the sums of a peer's rows to be pushed to it (fused gemm_ar)";
    case WaitSite::kDecodeTile: return "a peer's partial of a tile to be pushed to it (fused gemm_ar, decode)";
    case WaitSite::kDecodeSum: return "the sum of a tile it does not own to be pushed to it (fused gemm_ar, decode, two-shot)";
    case WaitSite::kRowsPushed: return "a peer's rows of A to be pushed to it (pipelined ag_gemm)";
  }
  return "?";
}

TimeoutMailbox::TimeoutMailbox() {
  try {
    void* h = nullptr;
    TPGEMM_CUDA_CHECK(cudaHostAlloc(&h, sizeof(TimeoutRecord), cudaHostAllocMapped));
    host_ = static_cast<TimeoutRecord*>(h);
    *host_ = TimeoutRecord{};
    void* d = nullptr;
    TPGEMM_CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
    dev_view_ = static_cast<TimeoutRecord*>(d);
    TPGEMM_CUDA_CHECK(cudaMalloc(&tripped_, sizeof(int32_t)));
    // Done before it returns: every stream's kernels, non-blocking ones too, start from zero.
    TPGEMM_CUDA_CHECK(cudaMemsetAsync(tripped_, 0, sizeof(int32_t), nullptr));
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  } catch (...) {
    release();  // a constructor that throws runs no destructor
    throw;
  }
}

TimeoutMailbox::~TimeoutMailbox() { release(); }

void TimeoutMailbox::release() {
  if (tripped_ != nullptr) cudaFree(tripped_);
  if (host_ != nullptr) cudaFreeHost(host_);
  tripped_ = nullptr;
  host_ = nullptr;
}

WaitEnv TimeoutMailbox::env(int rank, int64_t timeout_ms) const {
  WaitEnv e;
  e.record = dev_view_;
  e.tripped = tripped_;
  e.timeout_ns = static_cast<uint64_t>(timeout_ms) * 1000000ull;
  e.rank = rank;
  return e;
}

Status TimeoutMailbox::status() const {
  // The device writes the record's fields, then its code: read the code first (acquire), then them.
  if (std::atomic_ref<int32_t>(host_->code).load(std::memory_order_acquire) == 0) return Status::Ok();
  const TimeoutRecord r = *host_;
  const auto site = static_cast<WaitSite>(r.site);
  // The symmetric collectives wait on the data itself (NOTE [empty lanes]), not on a flag.
  const bool data = site == WaitSite::kAllReduceStart || site == WaitSite::kAllReduceMiddle ||
                    site == WaitSite::kTilePush || site == WaitSite::kAllGatherBlock || site == WaitSite::kReduceScatterStart ||
                    site == WaitSite::kTileGather || site == WaitSite::kDecodeTile || site == WaitSite::kDecodeSum;
  const std::string what = data ? std::string(": its data never reached this rank's staging buffer")
                                 : strfmt(" (%s %d), expected a flag >= %llu and saw %llu",
                                          site == WaitSite::kBarrier          ? "barrier"
                                          : site == WaitSite::kGatherPiece   ? "piece"
                                          : site == WaitSite::kGatheredChunk ? "chunk"
                                          : site == WaitSite::kTileFlag      ? "unit"
                                                                             : "round",
                                          r.index,
                                          (unsigned long long)r.expected, (unsigned long long)r.seen);
  return Status{ErrorCode::kTimeout,
              strfmt("rank %d waited %.1f ms on the GPU for rank %d: %s%s. Rank %d never got there (crashed, "
                     "stopped early, or made a different call). This team is now unusable: destroy it and create a "
                     "new one.",
                     r.rank, static_cast<double>(r.waited_ns) * 1e-6, r.peer, to_string(site), what.c_str(), r.peer)};
}

bool test_hooks_compiled() {
#ifdef TPGEMM_TEST_HOOKS
  return true;
#else
  return false;
#endif
}

bool test_drops_signals(int rank) {
  if (!test_hooks_compiled()) return false;  // a release build ignores the variable
  return env_int("TPGEMM_TEST_DROP_SIGNALS_RANK", 0, 1 << 20).value_or(-1) == rank;
}

bool test_fails_setup(int rank) {
  if (!test_hooks_compiled()) return false;
  return env_int("TPGEMM_TEST_FAIL_SETUP_RANK", 0, 1 << 20).value_or(-1) == rank;
}

int64_t in_step_timeout_ms(int64_t asked) {
  return asked != 0 || std::getenv("TPGEMM_TIMEOUT_MS") != nullptr ? asked : 5000;
}

}  // namespace tpgemm::comm
