#pragma once

#include "bench/cli.h"
#include "tpgemm/team.h"

namespace tpgemm::bench {

// Runs the benchmark as one rank of `team` (collective). Returns the process exit code:
// 0, or 1 if a --check failed.
int run_bench(const BenchConfig& cfg, const Team& team);

}  // namespace tpgemm::bench
