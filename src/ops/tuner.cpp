#include "ops/tuner.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "ops/common/random_fill.h"

namespace tpgemm::detail {
namespace {

// Timed calls per candidate: as many as its share of the budget allows, within these bounds.
constexpr int kMinTimed = 3, kMaxTimed = 10;
constexpr int64_t kDefaultBudgetMs = 500;  // for the timed calls of all candidates together
constexpr double kTie = 1.01;              // an earlier candidate keeps a tie within 1%

// One rank's operands for the problem: random A, B and C, D and the gathered A as outputs.
struct TuneOperands {
  DeviceBuffer a, b, c, d, a_gathered;
  Operands ops;
};

TuneOperands make_operands(const GemmProblem& p, int world, bool gathered_a, cudaStream_t stream) {
  const OperandSizes n = operand_sizes(p, world);
  const size_t es = dtype_size(p.dtype);
  TuneOperands t;
  t.a = DeviceBuffer(static_cast<size_t>(n.a) * es);
  t.b = DeviceBuffer(static_cast<size_t>(n.b) * es);
  if (p.has_c) t.c = DeviceBuffer(static_cast<size_t>(n.c) * es);
  t.d = DeviceBuffer(static_cast<size_t>(n.d) * es);
  if (gathered_a) t.a_gathered = DeviceBuffer(static_cast<size_t>(p.l * p.m * p.k) * es);
  ops::fill_random(t.a.get(), p.dtype, 1, 1, n.a, 0, 1, 0x7a11, stream);
  ops::fill_random(t.b.get(), p.dtype, 1, 1, n.b, 0, 1, 0x7a12, stream);
  if (p.has_c) ops::fill_random(t.c.get(), p.dtype, 1, 1, n.c, 0, 1, 0x7a13, stream);
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  t.ops = {t.a.get(), t.b.get(), t.c.get(), t.d.get(), t.a_gathered.get(), p.m};
  return t;
}

// The median of `timed` calls (ms), after one warm-up; the count from the first call's time.
float time_calls(OpImpl& impl, const Operands& o, cudaStream_t stream, double budget_ms) {
  const auto call = [&] {
    impl.prologue(o, stream);
    impl.run(o, stream);
  };
  std::vector<Event> ev;
  for (int i = 0; i <= kMaxTimed; ++i) ev.push_back(Event::create(/*timing=*/true));
  call();  // warm-up: first-use costs (cuBLASLt's kernels loading, peer mappings touched)
  TPGEMM_CUDA_CHECK(cudaEventRecord(ev[0].get(), stream));
  call();
  TPGEMM_CUDA_CHECK(cudaEventRecord(ev[1].get(), stream));
  TPGEMM_CUDA_CHECK(cudaEventSynchronize(ev[1].get()));
  float first = 0;
  TPGEMM_CUDA_CHECK(cudaEventElapsedTime(&first, ev[0].get(), ev[1].get()));
  const int timed = static_cast<int>(std::clamp<double>(budget_ms / std::max(first, 1e-3f), kMinTimed, kMaxTimed));
  std::vector<float> ms = {first};
  for (int i = 1; i < timed; ++i) {
    TPGEMM_CUDA_CHECK(cudaEventRecord(ev[i].get(), stream));
    call();
    TPGEMM_CUDA_CHECK(cudaEventRecord(ev[i + 1].get(), stream));
  }
  TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int i = 1; i < timed; ++i) {
    float t = 0;
    TPGEMM_CUDA_CHECK(cudaEventElapsedTime(&t, ev[i].get(), ev[i + 1].get()));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

std::string describe(const plan::Choice& c) {
  std::string s(to_string(c.impl));
  if (c.impl == Impl::kPipelinedCE || c.impl == Impl::kFused) s += strfmt("/%d", c.chunks);
  if (c.impl == Impl::kFused && c.comm_sms > 0) s += strfmt("/%dsm", c.comm_sms);
  return s;
}

Measured measure(const std::shared_ptr<TeamState>& team, const GemmProblem& p, const std::vector<plan::Choice>& candidates,
                 bool gathered_a) {
  TeamState& t = *team;
  const auto start = std::chrono::steady_clock::now();
  const double budget = static_cast<double>(env_int("TPGEMM_TUNE_BUDGET_MS", 1, 600000).value_or(kDefaultBudgetMs)) /
                        static_cast<double>(std::max<size_t>(1, candidates.size()));
  Stream stream;
  TuneOperands operands;
  t.agree_local("allocating the planner's operands", [&] {
    stream = Stream::create();
    operands = make_operands(p, t.world, gathered_a, stream.get());
  });
  Measured best;
  float best_ms = -1;
  std::vector<std::string> rows;
  for (const plan::Choice& c : candidates) {
    std::unique_ptr<OpImpl> impl;
    float mine = -1;  // this rank's median; -1: not built or failed (on some rank: every rank knows)
    try {
      t.agree_local("building a candidate", [&] { impl = make_impl({team, p, c}); });
      t.barrier();  // start together: a rank's skew is not the candidate's time
      // Agreed on, so that a candidate failing on one rank is skipped by all alike.
      t.agree_local("timing a candidate", [&] { mine = time_calls(*impl, operands.ops, stream.get(), budget); });
    } catch (const Error&) {
      if (!t.mailbox->status().ok()) throw;  // the team failed (a device wait timed out), not the candidate
      impl.reset();
      mine = -1;
    }
    t.check();  // NCCL's asynchronous errors too
    // The op's time is its slowest rank's.
    float slowest = mine;
    for (const auto& theirs : t.allgather(&mine, sizeof(mine), "the planner's timings")) {
      const float v = *reinterpret_cast<const float*>(theirs.data());
      slowest = v < 0 || slowest < 0 ? -1 : std::max(slowest, v);
    }
    if (slowest < 0) {
      rows.push_back(describe(c) + " -");
      continue;
    }
    rows.push_back(describe(c) + strfmt(" %.4f", slowest));
    if (best_ms < 0 || slowest * kTie < best_ms) {
      best_ms = slowest;
      best.choice = c;
      best.impl = std::move(impl);  // the previous best is freed here, on every rank alike
    }
  }
  if (best.impl == nullptr) throw Error(ErrorCode::kUnsupported, "the planner could build none of its candidates");
  for (size_t i = 0; i < rows.size(); ++i) best.table += (i ? ", " : "") + rows[i];
  best.tuning_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return best;
}

}  // namespace tpgemm::detail
