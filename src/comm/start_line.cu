#include "comm/device/sync.cuh"
#include "comm/start_line.h"
#include "comm/team_state.h"
#include "core/check.h"

namespace tpgemm::comm {
namespace {

// Longer than a host takes to enqueue an event and a graph of a few hundred nodes.
constexpr uint64_t kHoldNs = 200'000;

__global__ void hold_kernel(uint64_t ns) {
  const uint64_t until = global_timer_ns() + ns;
  while (global_timer_ns() < until) __nanosleep(1000);
}

}  // namespace

StartLine::StartLine(std::shared_ptr<detail::TeamState> team) : team_(std::move(team)) {
  team_->agree_local("allocating a start line", [&] {
    load_kernel_now(hold_kernel);
    word_ = DeviceBuffer(sizeof(int32_t));
    team_->zero_now(word_.get(), word_.bytes());
  });
  if (team_->all_lsa && team_->world > 1) pad_ = SignalPad(team_, 1, 0, 1, "start line");
}

void StartLine::enqueue(cudaStream_t stream) const {
  hold_kernel<<<1, 1, 0, stream>>>(kHoldNs);
  TPGEMM_CHECK_LAUNCH();
  if (team_->world == 1) return;
  if (team_->all_lsa) {
    pad_.barrier(0, stream);
  } else {
    TPGEMM_NCCL_CHECK(ncclAllReduce(word_.get(), word_.get(), 1, ncclInt32, ncclSum, team_->comm, stream));
  }
}

}  // namespace tpgemm::comm
