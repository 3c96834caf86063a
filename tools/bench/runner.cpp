// One rank of tpgemm-bench: for every shape, the baseline's parts (GEMM alone, collective
// alone), then every implementation: checked against a reference on fresh random data with a
// poisoned output (--check), and timed with CUDA events around each run (median per rank,
// maximum over ranks), the way bench/torch_peers.py times its peers. --op gemm times
// each GPU's local matmul alone: cuBLASLt against every configuration of tpgemm's GEMM core.
#include "bench/runner.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <tuple>
#include <utility>

#include "bench/report.h"
#include "bench/timer.h"
#include "bench/shapes.h"
#include "comm/team_state.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "default_shapes.h"
#include "gemm/lt_matmul.h"
#include "gemm/sm90_config.h"
#include "gemm/sm90_gemm.h"
#include "ops/common/nccl_types.h"
#include "ops/gemm_rs/tile_reduce.h"
#include "plan/problem.h"
#include "testing/problem_data.h"
#include "bench/random_shapes.h"
#include "testing/testing.h"
#include "tpgemm/tpgemm.h"

namespace tpgemm::bench {
namespace {

constexpr uint64_t kSeedAllReduce = 4000;
constexpr uint64_t kSeedGemmCore = 5000;

class Runner {
 public:
  Runner(const BenchConfig& cfg, const Team& team)
      : cfg_(cfg), team_(team), t_(*team.state()), root_(team.rank() == 0), stream_(Stream::create()),
        timer_(cfg, team, stream_.get()) {
    cudaDeviceProp prop{};
    TPGEMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, t_.device));
    device_ = strfmt("%d x %s", t_.world, prop.name);
    // --random's seed: rank 0's (from the clock unless given), so that every rank draws the same.
    uint64_t seed = cfg_.seed != 0 ? cfg_.seed
                                   : static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) % 1000000007;
    std::memcpy(&seed, t_.allgather(&seed, sizeof(seed), "the random shapes' seed")[0].data(), sizeof(seed));
    seed_ = seed;
  }

  int run() {
    const std::vector<ShapeSpec> shapes = selected_shapes();
    const std::vector<ShapeSpec> core_shapes = gemm_core_shapes();
    const std::string types = std::string(to_string(cfg_.dtype)) +
                              (cfg_.b_dtype ? " x " + std::string(to_string(*cfg_.b_dtype)) : std::string());
    if (root_) std::printf("tpgemm-bench: %s, %s, %zu shapes%s, %d timed + %d warm-up runs each%s\n", device_.c_str(),
                           types.c_str(), shapes.size() + core_shapes.size(),
                           cfg_.random > 0 ? strfmt(" drawn with --seed=%llu", (unsigned long long)seed_).c_str() : "",
                           cfg_.iterations, cfg_.warmup_iterations, cfg_.check ? ", checked" : "");
    bool printed_gemm_header = false, printed_ar_header = false;
    for (const ShapeSpec& s : shapes) {
      if (s.allreduce && cfg_.tune_only) continue;  // (the all-reduce's plan follows rules: nothing to tune)
      if (s.allreduce && !printed_ar_header) print(table_header("allreduce")), printed_ar_header = true;
      if (!s.allreduce && !printed_gemm_header) print(table_header(std::string(to_string(s.op)))), printed_gemm_header = true;
      s.allreduce ? run_allreduce(s) : run_gemm(s);
    }
    if (!core_shapes.empty()) print(table_header("gemm"));
    for (const ShapeSpec& s : core_shapes) run_gemm_core(s);
    if (root_) {
      std::printf("%s", summary(rows_).c_str());
      if (!cfg_.json.empty()) {
        char date[64];
        const std::time_t now = std::time(nullptr);
        std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
        const std::string seed = cfg_.random > 0 && cfg_.seed == 0 ? strfmt(" --seed=%llu", (unsigned long long)seed_) : "";
        std::ofstream(cfg_.json) << to_json(rows_, device_, "tpgemm-bench " + cfg_.command_line + seed, date);
      }
      std::printf("%s\n", failed_ ? "CHECK FAILED" : (cfg_.check ? "all checks passed" : "done (not checked)"));
      std::fflush(stdout);
    }
    return failed_ ? 1 : 0;
  }

 private:
  void print(const std::string& line) {
    if (root_) std::printf("%s\n", line.c_str()), std::fflush(stdout);
  }

  std::vector<ShapeSpec> selected_shapes() const {
    std::vector<ShapeSpec> all;
    if (cfg_.random > 0) {
      bench::ShapeDraw draw;
      draw.seed = seed_, draw.per_op = cfg_.random, draw.world = t_.world;
      for (const bench::RandomShape& r : bench::draw_shapes(cfg_.ops, draw)) all.push_back({false, r.op, r.m, r.n, r.k, 0});
      return all;
    }
    if (cfg_.m > 0)
      for (Op op : cfg_.ops) all.push_back({false, op, cfg_.m, cfg_.n, cfg_.k, 0});
    else if (!cfg_.shapes_file.empty())
      all = read_shapes_file(cfg_.shapes_file);
    else
      all = parse_shapes(kDefaultShapes, "built-in bench/shapes.txt");
    if (cfg_.bytes > 0) all.push_back({true, Op::kAgGemm, 0, 0, 0, cfg_.bytes});
    else if (cfg_.m == 0 && cfg_.shapes_file.empty())
      for (const auto& s : parse_shapes(kDefaultAllReduceSizes, "built-in bench/allreduce_sizes.txt")) all.push_back(s);
    std::vector<ShapeSpec> out;
    for (const auto& s : all)
      if (s.allreduce ? cfg_.allreduce : std::find(cfg_.ops.begin(), cfg_.ops.end(), s.op) != cfg_.ops.end()) out.push_back(s);
    return out;
  }

  // --op gemm: the local matmuls of the shape set, M x N x K as every rank multiplies them: the
  // 'ag' and 'rs' lines (the 'ar' ones are the small-M inference shapes), each M N K once.
  // With --random, N local matmuls drawn as one GPU's GEMM op would be (M from 1).
  std::vector<ShapeSpec> gemm_core_shapes() const {
    if (!cfg_.gemm_core) return {};
    if (cfg_.m > 0) return {{false, Op::kAgGemm, cfg_.m, cfg_.n, cfg_.k, 0}};
    if (cfg_.random > 0) {
      bench::ShapeDraw draw;
      draw.seed = seed_ ^ kSeedGemmCore, draw.per_op = cfg_.random, draw.world = 1;
      std::vector<ShapeSpec> out;
      for (const bench::RandomShape& r : bench::draw_shapes({Op::kAgGemm}, draw))
        out.push_back({false, Op::kAgGemm, r.m, r.n, r.k, 0});
      return out;
    }
    const std::vector<ShapeSpec> all = cfg_.shapes_file.empty() ? parse_shapes(kDefaultShapes, "built-in bench/shapes.txt")
                                                                : read_shapes_file(cfg_.shapes_file);
    std::vector<ShapeSpec> out;
    for (const ShapeSpec& s : all) {
      if (s.allreduce || s.op == Op::kGemmAr) continue;
      const auto same = [&](const ShapeSpec& o) { return o.m == s.m && o.n == s.n && o.k == s.k; };
      if (std::none_of(out.begin(), out.end(), same)) out.push_back(s);
    }
    return out;
  }

  // Makes a plan (collective); if every rank finds it unsupported, puts that in the row's note
  // and returns null. Any other error is real and propagates.
  template <typename P, typename... Args>
  std::unique_ptr<P> make_or_note(ResultRow& row, Args&&... args) {
    try {
      return std::make_unique<P>(std::forward<Args>(args)...);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kUnsupported) throw;
      row.note = "unsupported: ";
      row.note += e.what();
      return nullptr;
    }
  }
  // make_or_note, and an unsupported row printed and recorded at once.
  template <typename P, typename... Args>
  std::unique_ptr<P> make_or_report(ResultRow& row, Args&&... args) {
    std::unique_ptr<P> made = make_or_note<P>(row, std::forward<Args>(args)...);
    if (made == nullptr) {
      print(table_row(row));
      rows_.push_back(row);
    }
    return made;
  }

  // ---- GEMM ops ---------------------------------------------------------------------------
  static constexpr uint64_t kSeed = 1;  // NOTE [reproducible problem data]

  GemmProblem problem(const ShapeSpec& s) const {
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

  // What the plan runs (Plan::options) into the row; with_selection: how auto chose it, and the
  // slowest rank's tuning time (collective: every rank passes the same with_selection).
  void record_plan(ResultRow& row, const Plan& plan, bool with_selection) {
    const PlanOptions resolved = plan.options();
    row.chosen = std::string(to_string(resolved.impl));
    row.chunks = resolved.chunks_per_rank;
    row.comm_sms = resolved.comm_sms;
    if (resolved.matmul != Matmul::kAuto) row.matmul = std::string(to_string(resolved.matmul));
    if (with_selection) record_selection(row, plan.selection());
  }
  // How a plan's auto chose, and the slowest rank's tuning time (collective: -1 unless tuned, which
  // every rank's plan is alike).
  void record_selection(ResultRow& row, const PlanSelection& sel) {
    row.selection = std::string(to_string(sel.source)) + ": " + sel.detail;
    row.tuning_ms = sel.source == PlanSelection::Source::kTuned ? timer_.max_over_ranks(sel.tuning_ms) : -1;
  }

  // Poison D, run once, compare within --eps, else `type_eps` (the default for what D holds).
  // Returns the worst relative error over ranks (NaN counts as a failure).
  double check_once(void* d, int64_t d_count, DType dt, double type_eps, const std::function<void()>& fn,
                    const std::function<testing::Diff()>& compare, bool* ok) {
    testing::poison(d, d_count, dt, stream_.get());
    fn();
    TPGEMM_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    team_.check();
    const testing::Diff diff = compare();
    const double eps = cfg_.eps > 0 ? cfg_.eps : type_eps;
    *ok = timer_.all_ranks(diff.passes(eps));
    return timer_.max_over_ranks(diff.nonfinite > 0 ? 1e30 : diff.rel_err);
  }

  // Times `fn` into row.ms; with --check, checks it before and after the timed runs (races
  // show up as a moving error). `time_rows` replaces the plain timing (e.g. a paired one).
  void measure(ResultRow& row, const std::function<void()>& fn, const std::function<double(bool*)>& check,
               const std::function<void()>& time_rows = {}) {
    const auto time = [&] {
      if (time_rows) time_rows();
      else row.ms = timer_.time_ms(fn);
    };
    if (cfg_.check) {
      bool ok1 = false, ok2 = false;
      const double e1 = check(&ok1);
      time();
      const double e2 = check(&ok2);
      row.rel_err = std::max(e1, e2);
      row.check_ok = ok1 && ok2;
      failed_ = failed_ || !row.check_ok;
    } else {
      time();
    }
  }

  // The order of a shape's rows: the baseline, auto, then each implementation. They are timed in
  // alternation (time_interleaved_ms): timed one after another, a GPU heating over a shape's rows
  // made the same plan 5% slower timed fifth than second (bench/results/2026-11-23-ring).
  std::vector<Impl> gemm_impls(const GemmProblem& p) const {
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

  void run_gemm(const ShapeSpec& s) {
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
      auto plan = make_or_note<Plan>(row, team_, p, opts);
      if (plan != nullptr) {
        record_plan(row, *plan, /*with_selection=*/impl == Impl::kAuto && !rules);
        row_of.push_back(made.size());
        plans.push_back(std::move(plan));
      }
      made.push_back(row);
    }
    const Operands ops = g.operands();
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

  // --op gemm: on each rank's GPU, cuBLASLt (the baseline of the row's ratio), every configuration
  // of the GEMM core, and the core's own choice, on the same random operands.
  void run_gemm_core(const ShapeSpec& s) {
    const DType dt = cfg_.dtype;
    const int64_t l = cfg_.l, count = l * s.m * s.n;
    const size_t es = dtype_size(dt);
    const cudaStream_t st = stream_.get();
    gemm::MatmulShape shape = gemm::packed_shape(s.m, s.n, s.k, l, dt, cfg_.b_layout);
    shape.has_c = cfg_.beta != 0.0f;
    ResultRow base;
    base.op = "gemm";
    base.world = t_.world;
    base.m = s.m, base.n = s.n, base.k = s.k, base.l = l;
    base.dtype = std::string(to_string(dt));
    const bool kn = cfg_.b_layout == BLayout::kKN;
    DeviceBuffer a(static_cast<size_t>(l * s.m * s.k) * es), b(static_cast<size_t>(l * s.k * s.n) * es);
    DeviceBuffer c(shape.has_c ? static_cast<size_t>(count) * es : 0), d(static_cast<size_t>(count) * es), ref;
    testing::fill_random(a.get(), dt, l, s.m, s.k, 0, s.m, kSeedGemmCore, st);
    testing::fill_random(b.get(), dt, l, kn ? s.k : s.n, kn ? s.n : s.k, 0, kn ? s.k : s.n, kSeedGemmCore + 1, st);
    if (shape.has_c) testing::fill_random(c.get(), dt, l, s.m, s.n, 0, s.m, kSeedGemmCore + 2, st);
    if (cfg_.check) {
      ref = DeviceBuffer(static_cast<size_t>(count) * sizeof(float));
      TPGEMM_CUDA_CHECK(cudaMemsetAsync(ref.get(), 0, ref.bytes(), st));
      testing::reference_gemm(a.get(), b.get(), c.get(), ref.as<float>(), s.m, s.n, s.k, l, dt, cfg_.b_layout, cfg_.alpha,
                              cfg_.beta, testing::RefEngine::kCublasLt, t_.lt, st);
    }
    auto check = [&](const std::function<void()>& fn) {
      return [&, fn](bool* ok) {
        return check_once(d.get(), count, dt, testing::default_eps(dt), fn,
                          [&] { return testing::compare(d.get(), dt, ref.as<float>(), 1, count, 0, 0, 0, st); }, ok);
      };
    };
    DeviceBuffer lt_ws(gemm::LtMatmul::kWorkspaceBytes);
    const gemm::LtMatmul lt(t_.lt, shape);
    const std::function<void()> lt_fn = [&] { lt.run(a.get(), b.get(), c.get(), d.get(), cfg_.alpha, cfg_.beta, lt_ws.get(), st); };
    {
      ResultRow row = base;
      row.impl = row.chosen = "cublaslt";
      measure(row, lt_fn, check(lt_fn));
      base.baseline_ms = row.baseline_ms = row.ms;
      print(table_row(row));
      rows_.push_back(row);
    }
    std::vector<std::string> names;
    for (const auto& info : gemm::sm90::configs()) names.emplace_back(info.name);
    names.emplace_back("sm90_rule");  // the rule of sm90_config.cpp
    names.emplace_back("sm90_auto");  // the core's own choice: measured (NOTE [measured core config]), or TPGEMM_SM90_CONFIG's
    // A row's ratio is against cuBLASLt timed in alternation with it (time_interleaved_ms).
    const auto time_core = [&](ResultRow& row, const gemm::Sm90Gemm& mm) {
      row.chosen = mm.config();
      DeviceBuffer ws(mm.workspace_bytes());
      const std::function<void()> fn = [&] { mm.run(a.get(), b.get(), c.get(), d.get(), cfg_.alpha, cfg_.beta, ws.get(), st); };
      measure(row, fn, check(fn), [&] {
        const std::vector<double> t = timer_.time_interleaved_ms({lt_fn, fn});
        row.baseline_ms = t[0], row.ms = t[1];
      });
      print(table_row(row));
      rows_.push_back(row);
    };
    for (const std::string& name : names) {
      ResultRow row = base;
      row.impl = name;
      const std::string_view asked = name == "sm90_auto"   ? std::string_view()
                                     : name == "sm90_rule" ? std::string_view("rule")
                                                           : std::string_view(name);
      auto mm = make_or_report<gemm::Sm90Gemm>(row, shape, asked);
      if (mm != nullptr) time_core(row, *mm);
    }
    // The fused GEMM+ReduceScatter's and GEMM+AllReduce's kernel (coop_128x256_c2x1 serving tile
    // rows in order and raising a flag per tile, NOTE [tile signal]): what the fused ops' GEMM costs.
    const int64_t m_tiles = (s.m + ops::kTileReduceM - 1) / ops::kTileReduceM;
    const int64_t n_tiles = (s.n + ops::kTileReduceN - 1) / ops::kTileReduceN;
    DeviceBuffer flags(static_cast<size_t>(l * m_tiles * n_tiles) * sizeof(uint64_t)), seq(sizeof(uint64_t));
    TPGEMM_CUDA_CHECK(cudaMemsetAsync(flags.get(), 0, flags.bytes(), st));
    TPGEMM_CUDA_CHECK(cudaMemsetAsync(seq.get(), 1, seq.bytes(), st));  // any call number but 0
    gemm::sm90::TileSignal signal;
    signal.flags = flags.as<uint64_t>();
    signal.seq = seq.as<uint64_t>();
    signal.m_tiles = m_tiles, signal.n_tiles = n_tiles;
    ResultRow row = base;
    row.impl = "coop_128x256_c2x1+tile_signal";
    auto mm = make_or_report<gemm::Sm90Gemm>(row, shape, gemm::sm90::TileRowOrder{}, signal);
    if (mm != nullptr) time_core(row, *mm);
  }

  // The baseline's two parts alone: the local GEMM (cuBLASLt) and the NCCL collective.
  void time_parts(const testing::RankData& g, ResultRow& base) {
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

  // ---- All-reduce ------------------------------------------------------------------------
  void run_allreduce(const ShapeSpec& s) {
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

  const BenchConfig& cfg_;
  uint64_t seed_ = 0;  // --random's draw
  const Team& team_;
  detail::TeamState& t_;
  bool root_;
  Stream stream_;
  Timer timer_;
  std::string device_;
  std::vector<ResultRow> rows_;
  bool failed_ = false;
};

}  // namespace

int run_bench(const BenchConfig& cfg, const Team& team) { return Runner(cfg, team).run(); }

}  // namespace tpgemm::bench
