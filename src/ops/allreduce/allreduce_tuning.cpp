#include "ops/allreduce/allreduce_tuning.h"

#include <chrono>

#include "comm/start_line.h"
#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "ops/allreduce/symm_collective.h"
#include "ops/common/nccl_types.h"
#include "ops/common/random_fill.h"
#include "ops/timed_calls.h"
#include "plan/allreduce_timings.h"

namespace tpgemm::detail {
namespace {

// Timed calls per candidate and size, at most (TimedCalls::time: three to ten replays of up to 20
// calls): small sizes take well under 1 ms of calls, the largest about this.
constexpr double kBudgetMs = 20.0;

int64_t staging_bytes(AllReduceImpl algo, int64_t count, DType dtype, int world) {
  const int64_t elems = algo == AllReduceImpl::kOneShot ? ops::oneshot_stage_elems(count, world)
                                                          : ops::twoshot_stage_elems(count, world, /*scatter_only=*/false);
  return elems * static_cast<int64_t>(dtype_size(dtype));
}

// Makes candidate `algo` for calls of `count` elements into `symm` (NCCL needs none) and sets
// calls.call; each step agreed on (time_candidate).
void build_candidate(const std::shared_ptr<TeamState>& team, AllReduceImpl algo, int64_t count, DType dtype,
                     const void* in, void* out, std::unique_ptr<ops::SymmCollective>& symm, TimedCalls& calls) {
  TeamState& t = *team;
  if (algo == AllReduceImpl::kNccl) {
    calls.call = [&t, in, out, count, dtype](cudaStream_t s) {
      TPGEMM_NCCL_CHECK(ncclAllReduce(in, out, static_cast<size_t>(count), ops::nccl_type(dtype), ncclSum, t.comm, s));
    };
    return;
  }
  // Staging that would crowd the GPU is not worth a timing (agreed on before any rank makes it).
  t.agree_local("checking memory for an all-reduce candidate", [&] {
    size_t free_bytes = 0, total = 0;
    TPGEMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    const int64_t need = staging_bytes(algo, count, dtype, t.world);
    if (need > static_cast<int64_t>(free_bytes / 4))
      throw Error(ErrorCode::kUnsupported, strfmt("%s's staging of %lld bytes: more than a quarter of the %zu free",
                                                  std::string(to_string(algo)).c_str(), (long long)need, free_bytes));
  });
  t.agree_local("building an all-reduce candidate", [&] {  // NOTE [collective construction]
    symm = std::make_unique<ops::SymmCollective>(
        team, count, dtype, algo == AllReduceImpl::kTwoShot ? ops::SymmAlgo::kTwoShot : ops::SymmAlgo::kOneShot);
  });
  calls.call = [c = symm.get(), in, out, count](cudaStream_t s) { c->run(in, out, nullptr, 0.0f, s, count); };
}

}  // namespace

double measure_allreduce(const std::shared_ptr<TeamState>& team, DType dtype, int64_t message_bytes) {
  TeamState& t = *team;
  plan::AllReduceTimings& table = t.allreduce_timings;
  const std::vector<int64_t> sizes = plan::sizes_to_time(table, message_bytes);
  if (sizes.empty()) return 0;
  const auto start = std::chrono::steady_clock::now();
  const size_t es = dtype_size(dtype);
  Stream stream;
  DeviceBuffer in, out;
  t.agree_local("allocating the all-reduce timing's buffers", [&] {
    stream = Stream::create();
    in = DeviceBuffer(static_cast<size_t>(sizes.back()));
    out = DeviceBuffer(static_cast<size_t>(sizes.back()));
    // Each rank its own data, as in use (uniform values, not zeros).
    ops::fill_random(in.get(), dtype, 1, 1, sizes.back() / static_cast<int64_t>(es), 0, 1,
                     0xa11d + static_cast<uint64_t>(t.rank), stream.get());
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  });
  const comm::StartLine line(team);
  for (const int64_t bytes : sizes) {
    plan::AllReduceTimings::Row row;
    for (int i = 0; i < plan::kNumAllReduceCandidates; ++i) {
      const AllReduceImpl algo = plan::kAllReduceCandidates[i];
      if (!plan::worth_timing(table, algo, bytes)) continue;  // (the same table on every rank)
      std::unique_ptr<ops::SymmCollective> symm;
      TimedCalls calls;  // (after symm: its graph goes first)
      const auto build = [&] {
        build_candidate(team, algo, bytes / static_cast<int64_t>(es), dtype, in.get(), out.get(), symm, calls);
      };
      row.ms[i] = time_candidate(t, build, calls, line, stream.get(), kBudgetMs);
    }
    row.winner = plan::winner_of(row.ms);
    table.rows[bytes] = row;
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tpgemm::detail
