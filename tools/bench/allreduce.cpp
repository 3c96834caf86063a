// tpgemm-bench's all-reduce: NCCL's and each of tpgemm's algorithms, per size.
#include <algorithm>
#include <vector>

#include "bench/bench_rank.h"
#include "core/check.h"
#include "testing/testing.h"

namespace tpgemm::bench {

void Runner::run_allreduce(const ShapeSpec& s) {
  const DType dt = cfg_.dtype;
  const size_t es = dtype_size(dt);
  const int64_t count = s.bytes / static_cast<int64_t>(es);
  ResultRow base;
  base.op = "allreduce";
  base.world = t_.world;
  base.bytes = s.bytes;
  base.dtype = std::string(to_string(dt));
  const cudaStream_t st = stream_.get();
  DeviceBuffer in(static_cast<size_t>(count) * es), out(static_cast<size_t>(count) * es), ref;
  if (cfg_.check) {
    ref = DeviceBuffer(static_cast<size_t>(count) * sizeof(float));
    testing::reference_sum_of_ranks(ref.as<float>(), count, dt, t_.world, kSeedAllReduce, st);
  }
  std::vector<AllReduceImpl> impls = cfg_.allreduce_impls;
  if (impls.empty()) impls = {AllReduceImpl::kNccl, AllReduceImpl::kOneShot, AllReduceImpl::kTwoShot, AllReduceImpl::kAuto};
  if (std::find(impls.begin(), impls.end(), AllReduceImpl::kNccl) == impls.end()) impls.insert(impls.begin(), AllReduceImpl::kNccl);
  for (AllReduceImpl impl : impls) {
    ResultRow row = base;
    row.impl = std::string(to_string(impl));
    auto plan = make_or_report<AllReducePlan>(row, team_, count, dt, impl);
    if (plan == nullptr) continue;
    row.chosen = std::string(to_string(plan->impl()));
    if (impl == AllReduceImpl::kAuto) record_selection(row, plan->selection());
    void* input = in.get();
    auto fill = [&] { testing::fill_random(input, dt, 1, 1, count, 0, 1, kSeedAllReduce + t_.rank, st); };
    auto fn = [&] { plan->run(input, out.get(), st); };
    fill();
    if (cfg_.check) {
      testing::poison(out.get(), count, dt, st);
      fn();
      TPGEMM_CUDA_CHECK(cudaStreamSynchronize(st));
      team_.check();
      const testing::Diff d = testing::compare(out.get(), dt, ref.as<float>(), 1, count, count, count, 0, st);
      row.check_ok = timer_.all_ranks(d.passes(cfg_.eps > 0 ? cfg_.eps : testing::default_eps(dt)));
      row.rel_err = timer_.max_over_ranks(d.nonfinite > 0 ? 1e30 : d.rel_err);
      failed_ = failed_ || !row.check_ok;
      fill();
    }
    row.call_ms = timer_.time_ms(fn);
    row.ms = timer_.time_ms(fn, BenchConfig::Timing::kBatch);
    row.graph_ms = timer_.time_ms(fn, BenchConfig::Timing::kGraph);
    if (impl == AllReduceImpl::kNccl) base.baseline_ms = row.baseline_ms = row.ms;
    print(table_row(row));
    rows_.push_back(row);
  }
}

}  // namespace tpgemm::bench
