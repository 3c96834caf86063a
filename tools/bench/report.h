// tpgemm-bench's results: one row per (shape, implementation), printed as a table and written
// as JSON, plus geomean speedups per op and implementation.
#pragma once

#include <string>
#include <vector>

namespace tpgemm::bench {

struct ResultRow {
  std::string op;      // ag_gemm, gemm_rs, gemm_ar, allreduce, gemm (one GPU's matmul; baseline: cuBLASLt)
  int world = 1;
  long long m = 0, n = 0, k = 0, l = 1, bytes = 0;
  std::string dtype;      // of A (and B)
  std::string b_dtype;    // of B where it differs from A's (FP8; empty elsewhere)
  std::string out_dtype;  // of D (GEMM ops; empty elsewhere)
  std::string scale;      // FP8: tensor, row or block (empty elsewhere)
  std::string layout;     // GEMM ops: B's layout, and A's and the strides where not packed ("nk", "kn A=km lda=264")
  std::string impl;    // as asked
  std::string chosen;  // what ran (differs for auto)
  int chunks = 0, comm_sms = -1;  // GEMM ops: the plan's resolved options (Plan::options)
  std::string matmul;             // pipelined_ce: cublaslt or sm90 (Plan::options().matmul); else empty
  double ms = 0;       // median over iterations, max over ranks (all-reduce: back to back, as nccl-tests)
  double call_ms = 0;  // all-reduce: each call timed alone and synchronised, as the GEMM ops are
  double graph_ms = 0; // all-reduce: calls replayed from one CUDA graph (no host work per call)
  double baseline_ms = 0, gemm_ms = 0, comm_ms = 0;  // GEMM ops: the baseline, and its two parts alone
  double rel_err = -1;  // < 0: not checked
  bool check_ok = true;
  std::string note;     // why a row has no time (unsupported, ...)
  std::string selection;  // auto: how the plan chose (PlanSelection: tuned, cached, fallback)
  double tuning_ms = -1;  // auto: the planner's time measuring its candidates (< 0: none)

  double tflops_per_gpu() const;
  double speedup() const;        // baseline / this
  double ideal_speedup() const;  // baseline / max(gemm-only, comm-only)
  double busbw_gbs() const;      // all-reduce: nccl-tests bus bandwidth
};

std::string table_header(const std::string& op);  // the columns of the rows of `op`
std::string table_row(const ResultRow& r);
// Geomean of the speedup over the baseline per (op, W, impl), with the worst shape, and auto against
// the fastest implementation of each shape, as text lines.
std::string summary(const std::vector<ResultRow>& rows);
std::string to_json(const std::vector<ResultRow>& rows, const std::string& device, const std::string& command,
                    const std::string& date);

}  // namespace tpgemm::bench
