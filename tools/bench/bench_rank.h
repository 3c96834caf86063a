// One rank of tpgemm-bench: the shapes, the rows' shared steps and the report in runner.cpp; one
// file per bench: gemm_ops.cpp (AllGather+GEMM, GEMM+ReduceScatter, GEMM+AllReduce against their
// baseline's parts), gemm_core.cpp (--op gemm: the local matmul alone) and allreduce.cpp.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/cli.h"
#include "bench/report.h"
#include "bench/shapes.h"
#include "bench/timer.h"
#include "comm/team_state.h"
#include "core/cuda_raii.h"
#include "testing/problem_data.h"
#include "testing/testing.h"
#include "tpgemm/tpgemm.h"

namespace tpgemm::bench {

class Runner {
 public:
  Runner(const BenchConfig& cfg, const Team& team);
  // Every selected shape, then the summary (and --json). The process exit code: 0, or 1 if a
  // --check failed.
  int run();

 private:
  static constexpr uint64_t kSeed = 1;  // NOTE [reproducible problem data]
  static constexpr uint64_t kSeedAllReduce = 4000;
  static constexpr uint64_t kSeedGemmCore = 5000;

  void print(const std::string& line) {
    if (root_) std::printf("%s\n", line.c_str()), std::fflush(stdout);
  }
  std::vector<ShapeSpec> selected_shapes() const;
  std::vector<ShapeSpec> gemm_core_shapes() const;

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

  // The rows' shared steps (runner.cpp).
  // What the plan runs for calls of `m` rows (0: the plan's own M).
  void record_plan(ResultRow& row, const Plan& plan, bool with_selection, int64_t m = 0);
  void record_selection(ResultRow& row, const PlanSelection& sel);
  double check_once(void* d, int64_t d_count, DType dt, double type_eps, const std::function<void()>& fn,
                    const std::function<testing::Diff()>& compare, bool* ok);
  void measure(ResultRow& row, const std::function<void()>& fn, const std::function<double(bool*)>& check,
               const std::function<void()>& time_rows = {});

  // gemm_ops.cpp
  GemmProblem problem(const ShapeSpec& s) const;
  std::vector<Impl> gemm_impls(const GemmProblem& p) const;
  void run_gemm(const ShapeSpec& s);
  void time_parts(const testing::RankData& g, ResultRow& base);
  // gemm_core.cpp
  void run_gemm_core(const ShapeSpec& s);
  // allreduce.cpp
  void run_allreduce(const ShapeSpec& s);

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

}  // namespace tpgemm::bench
