#include "support/gpu_env.h"

namespace tpgemm::testsupport {

const comm::GpuCount& local_gpus() {
  static const comm::GpuCount count = comm::count_gpus_in_child();
  return count;
}

}  // namespace tpgemm::testsupport
