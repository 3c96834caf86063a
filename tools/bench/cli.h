// tpgemm-bench's command line: CUTLASS's distributed GEMM example flags (--m --n --k --l
// --alpha --beta --iterations --warmup-iterations --eps) plus tpgemm's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpgemm/types.h"

namespace tpgemm::bench {

struct BenchConfig {
  // What to run.
  std::vector<Op> ops;          // GEMM ops selected by --op
  bool allreduce = false;       // --op includes allreduce
  bool gemm_core = false;       // --op includes gemm: one GPU's matmul, cuBLASLt against tpgemm's core
  std::vector<Impl> impls;      // GEMM implementations (--impl); empty = every one that applies
  std::vector<AllReduceImpl> allreduce_impls;  // likewise for the all-reduce
  DType dtype = DType::kBF16;
  std::optional<DType> b_dtype;    // --b-dtype: B's type (GemmProblem::b_dtype); unset: dtype
  std::optional<DType> out_dtype;  // --out-dtype: D's type (GemmProblem::out_dtype); unset: dtype
  ScaleMode scale_mode = ScaleMode::kTensor;  // --scale: FP8 scales (GemmProblem::scale_mode)
  BLayout b_layout = BLayout::kNK;
  ALayout a_layout = ALayout::kMK;  // --a-layout
  int64_t lda = 0, ldb = 0;         // --lda, --ldb: row strides beyond the row (0: packed)
  int64_t ldd = 0;                  // --ldd: D's and C's row stride beyond the row (0: packed)
  int64_t batch_pad = 0;            // --batch-pad: every batch stride beyond its rows' (0: packed)
  bool b_broadcast = false;         // --b-broadcast: one B for the batch (GemmProblem::b_broadcast)
  ShardDim shard_dim = ShardDim::kM;  // ag_gemm / gemm_rs; gemm_ar always kM
  // One shape from the flags (all of m, n, k given), else the shape file.
  int64_t m = 0, n = 0, k = 0, l = 1;
  int64_t bytes = 0;            // --bytes: one all-reduce size
  std::string shapes_file;      // empty: the built-in shared shape set
  int random = 0;               // --random N: N drawn shapes per GEMM op instead (testing/random_shapes.h)
  // --plan-m P: tpgemm's plans (every row but the baseline) made for P rows, or the shape's M where
  // larger, each call giving the shape's M (Operands::m): what a plan serving calls of any M runs.
  int64_t plan_m = 0;
  uint64_t seed = 0;            // --seed: of the draw (0: from the clock; printed, in the results)
  float alpha = 1.0f, beta = 0.0f;
  // How.
  int iterations = 40;
  bool tune_only = false;       // --tune: make each shape's auto plan (tuning it into the cache) and say what it chose
  bool rules = false;           // --rules: beside auto, auto from the planner's rules alone (no tuning)
  // --timing: how GEMM ops are timed. kSync: each call between two events, waited for (as the
  // torch peers); kBatch: calls back to back; kGraph: calls replayed from one CUDA graph.
  enum class Timing { kSync, kBatch, kGraph } timing = Timing::kSync;
  int warmup_iterations = 10;
  double eps = 0.0;             // 0: the default for the dtype
  bool check = false;
  int gpus = 0;                 // 0: every local GPU
  int chunks = 0;               // pipelined chunks per rank (0: planner's choice)
  int comm_sms = -1;            // SMs left to communication kernels (-1: planner's choice)
  Matmul matmul = Matmul::kAuto;  // pipelined_ce's matmuls (kAuto: planner's choice)
  int64_t timeout_ms = 0;       // bound on waits for peers (0: TPGEMM_TIMEOUT_MS or 5000)
  std::string json;             // write the results here (rank 0)
  bool help = false;
  std::string command_line;     // as given, for the results file
};

// Throws Error(InvalidArgument) naming the flag, the value and what was expected.
BenchConfig parse_cli(const std::vector<std::string>& args);
std::string usage();

}  // namespace tpgemm::bench
