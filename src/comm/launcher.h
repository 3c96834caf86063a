// tpgemm's built-in launcher: fork one worker process per GPU on this machine. The parent
// never touches CUDA (a process that has initialised CUDA cannot fork CUDA workers).
#pragma once

#include <functional>

namespace tpgemm::comm {

struct LauncherOptions {
  // Kill every worker if they have not all finished after this long (0 = no limit).
  int timeout_s = 0;
  // After one worker fails, how long the others get to exit on SIGTERM before SIGKILL.
  int grace_s = 5;
  // Whether one worker's failure stops the others. Off, the others go on as under a launcher that
  // does not watch its ranks (torchrun's workers, mpirun's): the fault tests use it to see the
  // survivors end on their own.
  bool stop_peers_on_failure = true;
};

// Runs worker(rank) in `world` child processes and waits for all of them. If one fails (a
// non-zero return, an exception, a signal), the others are stopped, so a failed rank never
// leaves its peers hanging. Returns 0 when every worker returned 0, else the first failure's
// exit code (128 + signal for a signal). Children die with the parent.
int run_workers(int world, const std::function<int(int rank)>& worker, const LauncherOptions& options = {});

}  // namespace tpgemm::comm
