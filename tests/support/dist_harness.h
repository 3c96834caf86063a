// Multi-GPU tests: W forked ranks, one GPU each, each running the same body on its Team.
// Inside a rank there is no gtest: RANK_EXPECT prints what failed (with the rank) and counts
// it; the rank's exit code tells the parent, which asserts that every rank passed.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "tpgemm/tpgemm.h"

namespace tpgemm::testsupport {

// 0 when every rank's body returned 0 and no RANK_EXPECT failed in it. The team checks calls
// collectively unless `options` names another call_check.
// `limit_s` bounds the whole run (the launcher stops every rank after it: a hang is a failure).
int run_on_ranks(int world, const std::function<void(const Team&)>& body, const TeamOptions& options = {},
                 int limit_s = 600);

int& rank_failures();
int& current_rank();

// Runs fn; returns the Error it threw (code kOk if none).
Status caught(const std::function<void()>& fn);

}  // namespace tpgemm::testsupport

#define RANK_EXPECT(cond, ...)                                                                                  \
  do {                                                                                                          \
    if (!(cond)) {                                                                                              \
      std::fprintf(stderr, "[rank %d] %s:%d: expected %s: ", ::tpgemm::testsupport::current_rank(), __FILE__, \
                   __LINE__, #cond);                                                                            \
      std::fprintf(stderr, __VA_ARGS__);                                                                        \
      std::fprintf(stderr, "\n");                                                                               \
      ++::tpgemm::testsupport::rank_failures();                                                                 \
    }                                                                                                           \
  } while (0)
