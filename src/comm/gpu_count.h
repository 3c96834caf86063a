// How many CUDA devices this machine has, asked in a short-lived child process so that the
// caller stays free of CUDA and can still fork GPU workers afterwards.
#pragma once

#include <string>

namespace tpgemm::comm {

struct GpuCount {
  int count = 0;
  std::string error;  // why there are none, when count == 0 (no driver, no device, ...)
};

GpuCount count_gpus_in_child();

}  // namespace tpgemm::comm
