// Internal invariants: a failure is a tpgemm bug, reported as Error(Internal). No CUDA here.
#pragma once

#include "core/format.h"
#include "tpgemm/error.h"

// A broken internal invariant.
#define TPGEMM_ASSERT(cond)                                                                            \
  do {                                                                                                 \
    if (!(cond))                                                                                       \
      throw ::tpgemm::Error(::tpgemm::ErrorCode::kInternal,                                            \
                            ::tpgemm::strfmt("invariant '%s' broken at %s:%d", #cond, __FILE__, __LINE__)); \
  } while (0)
