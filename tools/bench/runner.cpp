// One rank of tpgemm-bench: for every shape, the baseline's parts (GEMM alone, collective
// alone), then every implementation: checked against a reference on fresh random data with a
// poisoned output (--check), and timed with CUDA events around each run (median per rank,
// maximum over ranks), the way bench/torch_peers.py times its peers. --op gemm times
// each GPU's local matmul alone: cuBLASLt against every configuration of tpgemm's GEMM core.
#include "bench/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>

#include "bench/bench_rank.h"
#include "bench/random_shapes.h"
#include "core/check.h"
#include "default_shapes.h"
#include "testing/testing.h"

namespace tpgemm::bench {
namespace {

// --random's shapes: `per_op` for each of `ops`, drawn from `seed` for a team of `world`.
std::vector<ShapeSpec> drawn_shapes(const std::vector<Op>& ops, int per_op, int world, uint64_t seed) {
  ShapeDraw draw;
  draw.seed = seed, draw.per_op = per_op, draw.world = world;
  std::vector<ShapeSpec> out;
  for (const RandomShape& r : draw_shapes(ops, draw)) out.push_back({false, r.op, r.m, r.n, r.k, 0});
  return out;
}

}  // namespace

Runner::Runner(const BenchConfig& cfg, const Team& team)
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

int Runner::run() {
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

std::vector<ShapeSpec> Runner::selected_shapes() const {
  std::vector<ShapeSpec> all;
  if (cfg_.random > 0) return drawn_shapes(cfg_.ops, cfg_.random, t_.world, seed_);
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
  for (auto s : all) {
    if (!(s.allreduce ? cfg_.allreduce : std::find(cfg_.ops.begin(), cfg_.ops.end(), s.op) != cfg_.ops.end())) continue;
    // A listed shape whose M the ranks cannot share (the shared shapes' M at W = 3, 5, 6, 7)
    // runs with M rounded down to a multiple of W, said once, rather than not at all. An M
    // given with --m is run as given (and refused if it does not split).
    const bool shards_m = !s.allreduce && s.op != Op::kGemmAr && cfg_.shard_dim == ShardDim::kM;
    if (cfg_.m == 0 && shards_m && s.m % t_.world != 0 && s.m > t_.world) {
      const int64_t m = s.m - s.m % t_.world;
      if (root_)
        std::printf("tpgemm-bench: %s M=%lld is not a multiple of W=%d: run with M=%lld\n",
                    std::string(to_string(s.op)).c_str(), (long long)s.m, t_.world, (long long)m);
      s.m = m;
    }
    out.push_back(s);
  }
  return out;
}

// --op gemm: the local matmuls of the shape set, M x N x K as every rank multiplies them: the
// 'ag' and 'rs' lines (the 'ar' ones are the small-M inference shapes), each M N K once.
// With --random, N local matmuls drawn as one GPU's GEMM op would be (M from 1).
std::vector<ShapeSpec> Runner::gemm_core_shapes() const {
  if (!cfg_.gemm_core) return {};
  if (cfg_.m > 0) return {{false, Op::kAgGemm, cfg_.m, cfg_.n, cfg_.k, 0}};
  if (cfg_.random > 0) return drawn_shapes({Op::kAgGemm}, cfg_.random, /*world=*/1, seed_ ^ kSeedGemmCore);
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

// What the plan runs (Plan::options) into the row; with_selection: how auto chose it, and the
// slowest rank's tuning time (collective: every rank passes the same with_selection).
void Runner::record_plan(ResultRow& row, const Plan& plan, bool with_selection, int64_t m) {
  const PlanOptions resolved = m > 0 ? plan.options(m) : plan.options();
  row.chosen = std::string(to_string(resolved.impl));
  row.chunks = resolved.chunks_per_rank;
  row.comm_sms = resolved.comm_sms;
  if (resolved.matmul != Matmul::kAuto) row.matmul = std::string(to_string(resolved.matmul));
  if (with_selection) record_selection(row, m > 0 && plan.selection(m) != nullptr ? *plan.selection(m) : plan.selection());
}
// How a plan's auto chose, and the slowest rank's tuning time (collective: -1 unless tuned, which
// every rank's plan is alike).
void Runner::record_selection(ResultRow& row, const PlanSelection& sel) {
  row.selection = std::string(to_string(sel.source)) + ": " + sel.detail;
  row.tuning_ms = sel.source == PlanSelection::Source::kTuned ? timer_.max_over_ranks(sel.tuning_ms) : -1;
}

// Poison D, run once, compare within --eps, else `type_eps` (the default for what D holds).
// Returns the worst relative error over ranks (NaN counts as a failure).
double Runner::check_once(void* d, int64_t d_count, DType dt, double type_eps, const std::function<void()>& fn,
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
void Runner::measure(ResultRow& row, const std::function<void()>& fn, const std::function<double(bool*)>& check,
             const std::function<void()>& time_rows) {
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

int run_bench(const BenchConfig& cfg, const Team& team) { return Runner(cfg, team).run(); }

}  // namespace tpgemm::bench
