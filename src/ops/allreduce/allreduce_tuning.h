// The measured all-reduce: times NCCL, one-shot and two-shot on the team's own GPUs
// (NOTE [measured all-reduce], plan/allreduce_timings.h).
#pragma once

#include <cstdint>
#include <memory>

#include "tpgemm/types.h"

namespace tpgemm::detail {

struct TeamState;

// Collective: every rank passes the same dtype and message. Adds the rows a plan of
// `message_bytes` needs and the team has not timed to team->allreduce_timings, and returns this
// rank's wall time spent (ms; 0 where nothing was left to time). A candidate that fails to build or
// run (memory, say) is skipped on every rank alike. Throws, on every rank alike, where the timing's
// own buffers or start line cannot be made (the plan then takes the rules), or the team has failed.
double measure_allreduce(const std::shared_ptr<TeamState>& team, DType dtype, int64_t message_bytes);

}  // namespace tpgemm::detail
