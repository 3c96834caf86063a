// tpgemm-bench's GEMM ops: per shape, the baseline's parts alone, then every implementation's plan
// made, checked, timed in alternation and checked again.
#include <algorithm>
#include <functional>
#include <memory>
#include <utility>

#include "bench/bench_rank.h"
#include "core/check.h"
#include "gemm/lt_matmul.h"
#include "ops/common/nccl_types.h"
#include "plan/problem.h"
#include "testing/testing.h"

namespace tpgemm::bench {

GemmProblem Runner::problem(const ShapeSpec& s) const {
  GemmProblem p;
  p.op = s.op;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.l = cfg_.l;
  p.dtype = cfg_.dtype;
  p.b_dtype = cfg_.b_dtype;
  p.out_dtype = cfg_.out_dtype;
  p.scale_mode = cfg_.scale_mode;
  p.b_layout = cfg_.b_layout;
  p.a_layout = cfg_.a_layout;
  p.alpha = cfg_.alpha;
  p.beta = cfg_.beta;
  p.has_c = cfg_.beta != 0.0f;
  if (s.op != Op::kGemmAr) p.shard_dim = cfg_.shard_dim;
  // Strides: the rows as this rank passes them (they follow the shard dimension), padded.
  if (cfg_.lda > 0) p.lda = plan::a_stored_row(p, t_.world) + cfg_.lda;
  if (cfg_.ldb > 0) p.ldb = plan::b_stored_row(p, t_.world) + cfg_.ldb;
  if (cfg_.ldd > 0) p.ldd = plan::d_cols(p, t_.world) + cfg_.ldd;
  if (cfg_.ldd > 0 && p.has_c) p.ldc = p.ldd;
  p.b_broadcast = cfg_.b_broadcast;
  if (cfg_.batch_pad > 0 && p.l > 1) {  // each operand's default batch stride, padded
    p.batch_stride_a = plan::a_batch_stride(p, t_.world) + cfg_.batch_pad;
    if (!p.b_broadcast) p.batch_stride_b = plan::b_batch_stride(p, t_.world) + cfg_.batch_pad;
    if (p.has_c) p.batch_stride_c = plan::c_batch_stride(p, t_.world) + cfg_.batch_pad;
    p.batch_stride_d = plan::d_batch_stride(p, t_.world) + cfg_.batch_pad;
  }
  return p;
}

// The order of a shape's rows: the baseline, auto, then each implementation. They are timed in
// alternation (time_interleaved_ms): timed one after another, a GPU heating over a shape's rows
// made the same plan 5% slower timed fifth than second (bench/results/2026-11-23-ring).
std::vector<Impl> Runner::gemm_impls(const GemmProblem& p) const {
  const Op op = p.op;
  std::vector<Impl> all = {Impl::kBaseline, Impl::kAuto, Impl::kPipelinedCE};
  if (op == Op::kGemmAr) all.insert(all.end(), {Impl::kGemmOneShot, Impl::kGemmTwoShot});
  if (op == Op::kGemmRs) all.push_back(Impl::kGemmReduceScatter);
  if (op == Op::kAgGemm && p.shard_dim == ShardDim::kM) all.push_back(Impl::kAllGatherGemm);
  if (p.shard_dim == ShardDim::kM) all.push_back(Impl::kFused);  // (fused: along M only)
  if (cfg_.impls.empty()) return all;
  std::vector<Impl> out = {Impl::kBaseline};  // always timed: every speedup is relative to it
  const std::vector<Impl> ladder = {Impl::kNaiveRemote, Impl::kThreadloadGather, Impl::kGatherThenGemm};
  const auto has = [](const std::vector<Impl>& v, Impl i) { return std::find(v.begin(), v.end(), i) != v.end(); };
  for (Impl i : cfg_.impls)  // those named, where they exist for this op
    if (i != Impl::kBaseline && (has(all, i) || (op == Op::kAgGemm && p.shard_dim == ShardDim::kM && has(ladder, i))))
      out.push_back(i);
  return out;
}

void Runner::run_gemm(const ShapeSpec& s) {
  const GemmProblem p = problem(s);
  ResultRow base;
  base.op = std::string(to_string(p.op)) + (p.shard_dim == ShardDim::kN ? "_n" : "");
  base.world = t_.world;
  base.m = p.m, base.n = p.n, base.k = p.k, base.l = p.l;
  base.dtype = std::string(to_string(p.dtype));
  if (b_dtype(p) != p.dtype) base.b_dtype = std::string(to_string(b_dtype(p)));
  base.out_dtype = std::string(to_string(d_dtype(p)));
  if (is_fp8(p.dtype)) base.scale = std::string(to_string(p.scale_mode));
  base.layout = std::string(to_string(p.b_layout));
  if (p.a_layout != ALayout::kMK) base.layout += " A=" + std::string(to_string(p.a_layout));
  if (p.lda != 0) base.layout += strfmt(" lda=%lld", (long long)p.lda);
  if (p.ldb != 0) base.layout += strfmt(" ldb=%lld", (long long)p.ldb);
  if (p.ldd != 0) base.layout += strfmt(" ldd=%lld", (long long)p.ldd);
  if (p.batch_stride_a != 0) base.layout += strfmt(" batch_pad=%lld", (long long)cfg_.batch_pad);
  if (p.b_broadcast) base.layout += " b_broadcast";
  const Status valid = Plan::can_implement(team_, p, {});
  if (!valid.ok()) {
    base.impl = std::string(1, '-');  // (not = "-": g++ 12 -Wrestrict false positive, GCC PR 105651)
    base.note = "skipped: " + valid.message;
    print(table_row(base));
    rows_.push_back(base);
    return;
  }
  if (cfg_.tune_only) {  // --tune: the planner's choice into the tuning cache, nothing timed here
    ResultRow row = base;
    row.impl = "auto";
    auto plan = make_or_report<Plan>(row, team_, p, PlanOptions{});
    if (plan == nullptr) return;
    record_plan(row, *plan, /*with_selection=*/true);
    print(strfmt("%-8s %2d %6lld %6lld %6lld %-13s %s/%d%s  %s (%.0f ms)", row.op.c_str(), row.world, row.m, row.n,
                 row.k, "auto", row.chosen.c_str(), row.chunks, row.matmul == "sm90" ? "/sm90" : "",
                 row.selection.c_str(), std::max(0.0, row.tuning_ms)));
    rows_.push_back(row);
    return;
  }
  const testing::RankData g(p, t_.world, t_.rank, kSeed, stream_.get());
  DeviceBuffer expected;
  if (cfg_.check)
    expected = testing::expected_d(p, t_.world, t_.rank, kSeed, testing::RefEngine::kCublasLt, t_.lt, stream_.get());
  time_parts(g, base);

  std::vector<std::pair<Impl, bool>> rows;  // (impl, auto from the planner's rules: --rules)
  for (Impl impl : gemm_impls(p)) {
    rows.emplace_back(impl, false);
    if (impl == Impl::kAuto && cfg_.rules) rows.emplace_back(impl, true);
  }
  // Every plan made first, then checked, timed in alternation (time_interleaved_ms) and checked
  // again (races show up as a moving error); the rows, unsupported ones too, then in order.
  std::vector<ResultRow> made;                // every row
  std::vector<std::unique_ptr<Plan>> plans;  // those with a plan, in order
  std::vector<size_t> row_of;                // plans[i]'s row in `made`
  for (const auto& [impl, rules] : rows) {
    ResultRow row = base;
    row.impl = rules ? "rules" : std::string(to_string(impl));
    PlanOptions opts;
    opts.impl = impl;
    opts.chunks_per_rank = cfg_.chunks;
    opts.comm_sms = cfg_.comm_sms;
    if (impl == Impl::kPipelinedCE || impl == Impl::kAuto) opts.matmul = cfg_.matmul;
    if (rules) opts.tune = PlanOptions::Tune::kOff;
    // --plan-m: a plan for more rows than the call's, whose range of M serves it (the baseline
    // stays the exact reference).
    GemmProblem planned = p;
    if (cfg_.plan_m > p.m && impl != Impl::kBaseline) {
      const int64_t unit = plan::call_m_unit(p, t_.world);
      planned.m = (cfg_.plan_m + unit - 1) / unit * unit;
      row.note = strfmt("plan M=%lld", (long long)planned.m);
    }
    auto plan = make_or_note<Plan>(row, team_, planned, opts);
    if (plan != nullptr && planned.m != p.m) {
      try {
        plan->prepare(p.m);  // (its range made and tuned here, not in the first timed call)
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kUnsupported) throw;
        row.note = std::string("unsupported: ") + e.what();
        plan.reset();
      }
    }
    if (plan != nullptr) {
      record_plan(row, *plan, /*with_selection=*/impl == Impl::kAuto && !rules, p.m);
      row_of.push_back(made.size());
      plans.push_back(std::move(plan));
    }
    made.push_back(row);
  }
  Operands ops = g.operands();
  ops.m = p.m;  // (each plan's own M, or a call of its range: --plan-m)
  std::vector<std::function<void()>> fns;
  for (const auto& plan : plans) fns.emplace_back([&ops, this, plan = plan.get()] { plan->run(ops, stream_.get()); });
  const auto check = [&](size_t i) {
    bool ok = false;
    const double err = check_once(g.d.get(), operand_sizes(p, t_.world).d, d_dtype(p), testing::default_eps(p), fns[i],
                                  [&] { return testing::compare_d(g.d.get(), expected, p, t_.world, stream_.get()); }, &ok);
    ResultRow& row = made[row_of[i]];
    row.rel_err = std::max(row.rel_err, err);
    row.check_ok = row.check_ok && ok;
    failed_ = failed_ || !ok;
  };
  if (cfg_.check)
    for (size_t i = 0; i < fns.size(); ++i) check(i);
  const std::vector<double> ms = timer_.time_interleaved_ms(fns);
  for (size_t i = 0; i < ms.size(); ++i) {
    made[row_of[i]].ms = ms[i];
    if (made[row_of[i]].impl == "baseline") base.baseline_ms = ms[i];
  }
  if (cfg_.check)
    for (size_t i = 0; i < fns.size(); ++i) check(i);
  for (ResultRow& row : made) {
    row.baseline_ms = base.baseline_ms;
    print(table_row(row));
    rows_.push_back(row);
  }
}

// The baseline's two parts alone: the local GEMM (cuBLASLt) and the NCCL collective.
void Runner::time_parts(const testing::RankData& g, ResultRow& base) {
  const GemmProblem& p = g.p;
  const int W = t_.world;
  const size_t es = dtype_size(p.dtype), ds = dtype_size(d_dtype(p));
  const cudaStream_t st = stream_.get();
  // ag_gemm gathers A (along N: B) before its matmul; values of the gathered part do not matter.
  const bool gather_b = p.op == Op::kAgGemm && p.shard_dim == ShardDim::kN;
  DeviceBuffer a_full(static_cast<size_t>(p.l * p.m * p.k) * es), d_full(static_cast<size_t>(p.l * p.m * p.n) * ds);
  DeviceBuffer b_full(gather_b ? static_cast<size_t>(p.l * p.k * p.n) * es : 0);
  DeviceBuffer ws(gemm::LtMatmul::kWorkspaceBytes);
  const bool gather_a = p.op == Op::kAgGemm && !gather_b;
  const void* a = gather_a ? a_full.get() : g.a.get();
  const void* b = gather_b ? b_full.get() : g.b.get();
  if (gather_a) testing::fill_random(a_full.get(), p.dtype, p.l, p.m, p.k, 0, p.m, kSeed, st);
  const gemm::MatmulShape shape = gemm::packed_shape(p, p.m, p.n);
  const gemm::LtMatmul mm(t_.lt, shape);
  Operands own = g.operands();  // (e4m3: this rank's scales)
  // Row-wise and block: the whole M x N matmul reads the scales of all M rows and N columns (any values).
  DeviceBuffer whole_scales;
  if (p.scale_mode != ScaleMode::kTensor) {
    GemmProblem whole = p;
    whole.op = Op::kGemmAr, whole.shard_dim = ShardDim::kM;
    const OperandSizes n = operand_sizes(whole, W);
    const int64_t count = std::max(n.a_scale, n.b_scale);
    whole_scales = DeviceBuffer(static_cast<size_t>(count) * sizeof(float));
    testing::fill_random(whole_scales.get(), DType::kFP32, 1, 1, count, 0, 1, kSeed, st);
    own.a_scale = own.b_scale = whole_scales.as<float>();
  }
  base.gemm_ms = timer_.time_ms([&] { mm.run(a, b, nullptr, d_full.get(), p.alpha, 0.0f, ws.get(), st, own.a_scale, own.b_scale); });
  // ag_gemm gathers the input type; gemm_rs and gemm_ar reduce D's.
  const ncclDataType_t type = ops::nccl_type(p.op == Op::kAgGemm ? p.dtype : d_dtype(p));
  // (the shards' packed elements: the collective alone, whatever the operands' strides)
  const size_t a_shard = static_cast<size_t>(p.l * (p.m / W) * p.k), b_shard = static_cast<size_t>(p.l * (p.n / W) * p.k);
  base.comm_ms = timer_.time_ms([&] {
    if (gather_b)
      TPGEMM_NCCL_CHECK(ncclAllGather(g.b.get(), b_full.get(), b_shard, type, t_.comm, st));
    else if (gather_a)
      TPGEMM_NCCL_CHECK(ncclAllGather(g.a.get(), a_full.get(), a_shard, type, t_.comm, st));
    else if (p.op == Op::kGemmRs)
      TPGEMM_NCCL_CHECK(ncclReduceScatter(d_full.get(), g.d.get(),
                                          static_cast<size_t>(p.l * plan::d_rows(p, W) * plan::d_cols(p, W)), type,
                                          ncclSum, t_.comm, st));
    else
      TPGEMM_NCCL_CHECK(ncclAllReduce(d_full.get(), d_full.get(), static_cast<size_t>(p.l * p.m * p.n), type, ncclSum, t_.comm, st));
  });
}

}  // namespace tpgemm::bench
