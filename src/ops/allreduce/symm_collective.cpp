#include "ops/allreduce/symm_collective.h"

#include <algorithm>

#include "comm/team_state.h"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/env.h"
#include "plan/problem.h"

namespace tpgemm::ops {

SymmCollective::SymmCollective(std::shared_ptr<detail::TeamState> team, int64_t count, DType dtype, SymmAlgo algo,
                               int64_t batches)
    : team_(std::move(team)), count_(count), dtype_(dtype), algo_(algo), batches_(batches) {
  detail::TeamState& t = *team_;
  const bool two_shot = algo == SymmAlgo::kTwoShot || algo == SymmAlgo::kReduceScatter;
  const bool scatter_only = algo == SymmAlgo::kReduceScatter;
  TPGEMM_ASSERT(count % 8 == 0 && t.world <= plan::kMaxSymmetricWorld && t.all_lsa);
  TPGEMM_ASSERT(!scatter_only || count / 8 % t.world == 0);
  TPGEMM_ASSERT(batches >= 1 && count / 8 % batches == 0 && (batches == 1 || algo == SymmAlgo::kAllGather));
  kernel_ = algo == SymmAlgo::kAllGather ? allgather_fn(t.world)
            : two_shot                   ? twoshot_fn(dtype, t.world)
                                         : oneshot_fn(dtype, t.world);
  drop_sends_ = comm::test_drops_signals(t.rank);
  dependent_launch_ = env_int("TPGEMM_SYMM_PDL", 0, 1).value_or(1) == 1;
  // One vector per thread per block, up to what fits at once: two-shot's unit is a slice, the
  // others' the whole input.
  const int64_t vecs = two_shot ? (count / 8 + t.world - 1) / t.world : count / 8;
  // Threads per block: 128 for small messages, so that they spread over more SMs, each issuing
  // its own NVLink stores; 512 for large ones, above 4 MiB of input at W=2 and 16 MiB at W >= 4
  // (where each measured faster: docs/planner.md, "Kernel knobs"). TPGEMM_SYMM_THREADS overrides
  // it (tuning; it must be the same on every rank, like the count: plans compare it).
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
  const int64_t small_up_to = (t.world <= 2 ? int64_t(4) : int64_t(16)) << 20;
  const int64_t chosen = bytes <= small_up_to ? 128 : kAllReduceThreads;
  threads_ = static_cast<int>(env_int("TPGEMM_SYMM_THREADS", 64, kAllReduceThreads).value_or(chosen)) / 32 * 32;
  const int64_t wanted = std::max<int64_t>(1, (vecs + threads_ - 1) / threads_);
  if (comm::test_fails_setup(t.rank))
    throw Error(ErrorCode::kInternal, "TPGEMM_TEST_FAIL_SETUP_RANK: this rank fails its symmetric collective's setup");
  // NOTE [collective construction]: local work first, agreed on, then the symmetric buffers.
  t.agree_local("allocating the symmetric collective's local workspace", [&] {
    // Block b waits for block b of each peer, so every block must be resident at once (a
    // bounded wait reports it if a peer's never runs).
    int per_sm = 0;
    TPGEMM_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel_, threads_, 0));
    blocks_ = static_cast<int>(std::min<int64_t>(wanted, std::max(1, std::min(per_sm, 1024 / threads_) * t.num_sms)));
    calls_ = DeviceBuffer(static_cast<size_t>(blocks_) * sizeof(uint64_t));
    t.zero_now(calls_.get(), calls_.bytes());
  });
  // Block b of every rank must handle the same vectors (NOTE [two staging halves]): the
  // smallest block count any rank can run.
  for (const auto& theirs : t.allgather(&blocks_, sizeof(blocks_), "the symmetric collective's block count"))
    blocks_ = std::min(blocks_, *reinterpret_cast<const int*>(theirs.data()));
  // (The all-gather's staging is one-shot's: W slots of the input, two halves.)
  const int64_t stage = two_shot ? twoshot_stage_elems(count, t.world, scatter_only) : oneshot_stage_elems(count, t.world);
  stage_ = comm::SymmetricBuffer(team_, static_cast<size_t>(stage) * dtype_size(dtype), "symmetric collective staging");  // empty: zeros
}

void SymmCollective::run(const void* in, void* out, const void* c, float beta, cudaStream_t stream, int64_t count) const {
  TPGEMM_ASSERT(in != nullptr && out != nullptr && c != out && (algo_ != SymmAlgo::kAllGather || (c == nullptr && in != out)));
  if (count == 0) count = count_;
  TPGEMM_ASSERT(count > 0 && count <= count_ && count % 8 == 0 && count / 8 % batches_ == 0 &&
                (algo_ != SymmAlgo::kReduceScatter || count / 8 % team_->world == 0));
  SymmCollectiveArgs a;
  a.in = in;
  for (int q = 0; q < team_->world; ++q) a.stage[q] = stage_.peer(q);
  a.calls = calls_.as<uint64_t>();
  a.count = count;
  a.slot_vecs = count_ / 8;  // NOTE [staging by capacity]
  a.stride = int64_t(blocks_) * threads_;
  a.out = out;
  a.c = c;
  a.beta = beta;
  a.world = team_->world;
  a.scatter_only = algo_ == SymmAlgo::kReduceScatter;
  a.batches = batches_;
  a.drop_sends = drop_sends_;
  a.env = team_->wait_env();
  void* params[] = {&a};
  // The blocks with a vector of their own this call (NOTE [staging by capacity]).
  const bool two_shot = algo_ == SymmAlgo::kTwoShot || algo_ == SymmAlgo::kReduceScatter;
  const int64_t units = two_shot ? (count / 8 + team_->world - 1) / team_->world : count / 8;
  const int64_t blocks = std::min<int64_t>(blocks_, (units + threads_ - 1) / threads_);
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(threads_);
  cfg.stream = stream;
  // NOTE [dependent launch]: launched while the kernel before it ends (each kernel here waits for it
  // before reading anything but its parameters).
  cudaLaunchAttribute dependent{};
  dependent.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  dependent.val.programmaticStreamSerializationAllowed = 1;
  if (dependent_launch_) cfg.attrs = &dependent, cfg.numAttrs = 1;
  TPGEMM_CUDA_CHECK(cudaLaunchKernelExC(&cfg, kernel_, params));
}

}  // namespace tpgemm::ops
