#include "support/plan_check.h"

#include <cstring>
#include <vector>

#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/format.h"
#include "support/dist_harness.h"
#include "testing/problem_data.h"
#include "testing/testing.h"

namespace tpgemm::testsupport {
namespace {

// `bytes` bytes of device memory on the host, after all work on the device: the copy runs on the
// legacy default stream, which does not wait for the non-blocking streams the tests run on.
std::vector<uint8_t> host_copy(const void* d, size_t bytes) {
  std::vector<uint8_t> host(bytes);
  TPGEMM_CUDA_CHECK(cudaDeviceSynchronize());
  TPGEMM_CUDA_CHECK(cudaMemcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost));
  return host;
}

// tpgemm's gemm_ar implementations give every rank the same bits of D when there is no C (each
// rank's own C is added last): a hash of D, compared across ranks. Collective, like the run.
bool same_d_on_every_rank(const Team& team, const GemmProblem& p, Impl ran, const testing::RankData& data,
                          int64_t d_count) {
  if (p.op != Op::kGemmAr || p.has_c || ran == Impl::kBaseline || team.world_size() == 1) return true;
  const uint64_t hash = hash_device_bytes(data.d.get(), static_cast<size_t>(d_count) * dtype_size(d_dtype(p)));
  bool same = true;
  for (const auto& blob : team.state()->allgather(&hash, sizeof(hash), "a hash of D"))
    same = same && std::memcmp(blob.data(), &hash, sizeof(hash)) == 0;
  return same;
}

// PlanOptions::return_gathered_a: the gathered A a run wrote, byte for byte the whole A of which
// every rank holds a block (NOTE [reproducible problem data]). Synchronises.
bool gathered_a_is_the_whole_a(const GemmProblem& p, const DeviceBuffer& gathered, uint64_t seed, cudaStream_t stream) {
  const DeviceBuffer want(gathered.bytes());
  testing::fill_gathered_a(want.get(), p, seed, stream);
  return host_copy(gathered.get(), gathered.bytes()) == host_copy(want.get(), want.bytes());
}

}  // namespace

uint64_t hash_device_bytes(const void* d, size_t bytes) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : host_copy(d, bytes)) h = (h ^ b) * 1099511628211ull;
  return h;
}

PlanCheck check_plan(const Team& team, const GemmProblem& p, const PlanOptions& options, int runs, uint64_t seed, bool graph) {
  PlanCheck out;
  try {
    Stream stream = Stream::create();
    Plan plan(team, p, options);
    out.ran = plan.impl();
    testing::RankData data(p, team.world_size(), team.rank(), seed, stream.get());
    const int64_t d_count = operand_sizes(p, team.world_size()).d;
    // PlanOptions::return_gathered_a: the whole A, packed, written beside D.
    const int64_t a_count = options.return_gathered_a ? p.l * p.m * p.k : 0;
    const DeviceBuffer gathered(static_cast<size_t>(a_count) * dtype_size(p.dtype));
    const auto operands = [&] {
      Operands o = data.operands();
      if (a_count > 0) o.a_gathered = gathered.get();
      return o;
    };
    CudaGraph replay;
    if (graph) replay = CudaGraph::capture(stream.get(), [&] { plan.run(operands(), stream.get()); });
    out.ok = true;
    for (int i = 0; i < runs; ++i) {
      const uint64_t s = seed + static_cast<uint64_t>(i);
      data.refill(s, stream.get());
      testing::poison(data.d.get(), d_count, d_dtype(p), stream.get());
      if (a_count > 0) TPGEMM_CUDA_CHECK(cudaMemsetAsync(gathered.get(), 0xFF, gathered.bytes(), stream.get()));
      if (graph) replay.launch(stream.get());
      else plan.run(operands(), stream.get());
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      team.check();
      const DeviceBuffer want = testing::expected_d(p, team.world_size(), team.rank(), s, testing::RefEngine::kNaive,
                                                    team.state()->lt, stream.get());
      const testing::Diff d = testing::compare_d(data.d.get(), want, p, team.world_size(), stream.get());
      out.worst_rel_err = std::max(out.worst_rel_err, d.rel_err);
      out.nonfinite += d.nonfinite;
      out.same_d_on_every_rank = out.same_d_on_every_rank && same_d_on_every_rank(team, p, out.ran, data, d_count);
      out.gathered_a_ok = out.gathered_a_ok && (a_count == 0 || gathered_a_is_the_whole_a(p, gathered, s, stream.get()));
      out.ok = out.ok && d.passes(testing::default_eps(p)) && out.same_d_on_every_rank && out.gathered_a_ok;
    }
  } catch (const Error& e) {
    out.status = {e.code(), e.what()};
    out.ok = false;
  }
  return out;
}

PlanCheck check_calls_of_m(const Team& team, const GemmProblem& p, const PlanOptions& options,
                           const std::vector<int64_t>& ms, uint64_t seed, bool graph) {
  PlanCheck out;
  const int W = team.world_size();
  try {
    Stream stream = Stream::create();
    const cudaStream_t st = stream.get();
    Plan plan(team, p, options);
    out.ran = plan.impl();
    const int64_t d_max = operand_sizes(p, W).d;
    DeviceBuffer d(static_cast<size_t>(d_max) * dtype_size(d_dtype(p)));
    out.ok = true;
    for (size_t i = 0; i < ms.size(); ++i) {
      GemmProblem q = p;
      q.m = ms[i];
      const uint64_t s = seed + i;
      testing::RankData data(q, W, team.rank(), s, st);
      Operands o = data.operands();
      o.d = d.get();
      o.m = q.m;
      testing::poison(d.get(), d_max, d_dtype(p), st);
      if (graph) {
        plan.prepare(q.m);
        const CudaGraph replay = CudaGraph::capture(st, [&] { plan.run(o, st); });
        replay.launch(st);
        TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
      } else {
        plan.run(o, st);
      }
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
      team.check();
      const int64_t d_count = operand_sizes(q, W).d;
      const DeviceBuffer want =
          testing::expected_d(q, W, team.rank(), s, testing::RefEngine::kNaive, team.state()->lt, st);
      const testing::Diff diff = testing::compare_d(d.get(), want, q, W, st);
      out.worst_rel_err = std::max(out.worst_rel_err, diff.rel_err);
      out.nonfinite += diff.nonfinite;
      bool ok = diff.passes(testing::default_eps(p));
      if (d_count < d_max) {  // the rest of D: still all poison (NaN), compared with zeros
        const int64_t rest = d_max - d_count;
        DeviceBuffer zeros(static_cast<size_t>(rest) * sizeof(float));
        TPGEMM_CUDA_CHECK(cudaMemsetAsync(zeros.get(), 0, zeros.bytes(), st));
        const char* tail = d.as<char>() + d_count * static_cast<int64_t>(dtype_size(d_dtype(p)));
        const testing::Diff t = testing::compare(tail, d_dtype(p), zeros.as<float>(), 1, rest, rest, rest, 0, st);
        if (t.nonfinite != rest) {
          ok = false;
          out.status = {ErrorCode::kInternal, strfmt("M=%lld wrote %lld elements of D beyond its own %lld", (long long)q.m,
                                                     (long long)(rest - t.nonfinite), (long long)d_count)};
        }
      }
      if (!ok && out.status.ok())
        out.status = {ErrorCode::kInternal, strfmt("M=%lld (call %zu) differs from the reference: rel_err %.2e, %lld non-finite",
                                                   (long long)q.m, i, diff.rel_err, (long long)diff.nonfinite)};
      out.ok = out.ok && ok;
    }
  } catch (const Error& e) {
    out.status = {e.code(), e.what()};
    out.ok = false;
  }
  return out;
}

std::string describe_check(const GemmProblem& p, const PlanOptions& o, const PlanCheck& c) {
  return describe(p) + strfmt(" impl=%s chunks=%d ran=%s: rel_err %.2e, %lld non-finite%s%s%s%s",
                              std::string(to_string(o.impl)).c_str(), o.chunks_per_rank,
                              std::string(to_string(c.ran)).c_str(), c.worst_rel_err, (long long)c.nonfinite,
                              c.same_d_on_every_rank ? "" : ", D differs between ranks",
                              c.gathered_a_ok ? "" : ", the gathered A differs from the whole A",
                              c.status.ok() ? "" : ", error: ", c.status.message.c_str());
}

std::string check_allreduce(const Team& team, int64_t count, DType dtype, AllReduceImpl impl, bool in_place, int runs,
                            uint64_t seed) {
  const std::string what = strfmt("allreduce %s count %lld %s%s", std::string(to_string(impl)).c_str(), (long long)count,
                                  std::string(to_string(dtype)).c_str(), in_place ? " in place" : "");
  // Every run is made whatever an earlier one found: each is collective, and a rank that left
  // early would leave its peers waiting.
  std::string failed;
  const Status s = caught([&] {
    Stream stream = Stream::create();
    const cudaStream_t st = stream.get();
    const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    AllReducePlan plan(team, count, dtype, impl);
    DeviceBuffer own(bytes), out(bytes), ref(static_cast<size_t>(count) * sizeof(float));
    testing::reference_sum_of_ranks(ref.as<float>(), count, dtype, team.world_size(), seed + count, st);
    for (int run = 0; run < runs; ++run) {
      testing::fill_random(own.get(), dtype, 1, 1, count, 0, 1, seed + team.rank() + count, st);
      void* dst = in_place ? own.get() : out.get();
      if (!in_place) testing::poison(dst, count, dtype, st);
      plan.run(own.get(), dst, st);
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
      team.check();
      const auto d = testing::compare(dst, dtype, ref.as<float>(), 1, count, count, count, 0, st);
      if (!d.passes(testing::default_eps(dtype)) && failed.empty())
        failed = strfmt("run %d: rel_err %.2e, %lld non-finite", run, d.rel_err, (long long)d.nonfinite);
    }
  });
  if (!s.ok()) failed = s.message;
  return failed.empty() ? failed : what + ": " + failed;
}

}  // namespace tpgemm::testsupport
