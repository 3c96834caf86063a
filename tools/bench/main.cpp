// tpgemm-bench: forks one worker per local GPU (or joins the ranks torchrun / mpirun started)
// and runs the benchmark on each.
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cli.h"
#include "bench/runner.h"
#include "comm/bootstrap.h"
#include "comm/gpu_count.h"
#include "comm/launcher.h"
#include "comm/timeout.h"
#include "core/check.h"
#include "tpgemm/tpgemm.h"

int main(int argc, char** argv) {
  using namespace tpgemm;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  bench::BenchConfig cfg;
  try {
    cfg = bench::parse_cli(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const Error& e) {
    std::fprintf(stderr, "tpgemm-bench: %s\n\n%s", e.what(), bench::usage().c_str());
    return 2;
  }
  if (cfg.help) {
    std::printf("%s", bench::usage().c_str());
    return 0;
  }
  // NVLink multicast stays off unless the caller explicitly asks for it (it is off on the
  // shared machines this project is measured on).
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  TeamOptions topts;
  // Every timed run starts from the start line: ranks in step on the GPU.
  topts.timeout_ms = comm::in_step_timeout_ms(cfg.timeout_ms);
  try {
    if (const auto env = comm::read_launch_env()) {  // started by torchrun / mpirun: one rank per process
      const Team team = Team::from_env(topts);
      return bench::run_bench(cfg, team);
    }
    const comm::GpuCount gpus = comm::count_gpus_in_child();
    if (gpus.count == 0) {
      std::fprintf(stderr, "tpgemm-bench: no GPU on this machine (%s); it needs NVIDIA Hopper GPUs\n", gpus.error.c_str());
      return 1;
    }
    const int world = cfg.gpus > 0 ? cfg.gpus : gpus.count;
    if (world > gpus.count) {
      std::fprintf(stderr, "tpgemm-bench: --gpus=%d but only %d GPU(s) are visible (CUDA_VISIBLE_DEVICES='%s')\n", world,
                   gpus.count, std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES") : "");
      return 2;
    }
    ncclUniqueId id;
    TPGEMM_NCCL_CHECK(ncclGetUniqueId(&id));
    return comm::run_workers(world, [&](int rank) {
      const Team team = Team::from_unique_id(id, rank, world, rank, topts);
      return bench::run_bench(cfg, team);
    });
  } catch (const Error& e) {
    std::fprintf(stderr, "tpgemm-bench: %s\n", e.what());
    return 1;
  }
}
