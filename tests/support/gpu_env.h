// GPU tests skip, visibly, where there are not enough GPUs (CI has none).
#pragma once

#include <gtest/gtest.h>

#include "comm/gpu_count.h"

namespace tpgemm::testsupport {

// Counted once, in a child process, so that this process can still fork CUDA workers.
const comm::GpuCount& local_gpus();

}  // namespace tpgemm::testsupport

#define TPGEMM_REQUIRE_GPUS(n)                                                                              \
  do {                                                                                                      \
    const auto& tpgemm_g_ = ::tpgemm::testsupport::local_gpus();                                            \
    if (tpgemm_g_.count < (n))                                                                              \
      GTEST_SKIP() << "needs " << (n) << " GPU(s), this machine has " << tpgemm_g_.count << " ("             \
                   << (tpgemm_g_.error.empty() ? "too few" : tpgemm_g_.error) << ")";                       \
  } while (0)
