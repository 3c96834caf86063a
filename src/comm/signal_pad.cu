#include "comm/device/sync.cuh"
#include "comm/signal_pad.h"
#include "comm/team_state.h"
#include "core/check.h"

namespace tpgemm::comm {
namespace {

// One block of 32 threads (W <= 32 checked on the host). Thread q signals and waits on peer q.
__global__ void barrier_kernel(uint64_t* const* peer_pads, int group, int world, uint64_t* control, int rounds,
                               bool bump, WaitEnv env) {
  __shared__ uint64_t value;
  if (tripped(env)) return;
  if (threadIdx.x == 0) {
    uint64_t e = control[0];
    if (bump) {
      e += 1;
      control[0] = e;
      for (int j = 0; j < rounds; ++j) control[1 + j] = (e - 1) * rounds + j + 1;
    }
    value = e;
    __threadfence_system();  // everything this stream wrote before (copies included) is visible before the flag
  }
  __syncthreads();
  const int q = threadIdx.x;
  if (q < world && q != env.rank) {
    st_release_sys(peer_pads[q] + group * world + env.rank, value);
    wait_geq(peer_pads[env.rank] + group * world + q, value, env, q, WaitSite::kBarrier, group);
  }
}

// One thread: what the stream ran before (kernels and copies) is visible, then the flag.
__global__ void raise_kernel(uint64_t* slot, const uint64_t* seq, int round) {
  __threadfence_system();
  st_release_sys(slot, seq[round]);
}

__global__ void wait_kernel(const uint64_t* slot, const uint64_t* seq, int round, int peer, WaitSite site, WaitEnv env) {
  if (threadIdx.x == 0) wait_geq(slot, seq[round], env, peer, site, round);
}

}  // namespace

SignalPad::SignalPad(std::shared_ptr<detail::TeamState> team, int num_barriers, int num_families, int rounds,
                     const char* what)
    : team_(std::move(team)), num_barriers_(num_barriers), rounds_(rounds) {
  TPGEMM_ASSERT(team_->world <= 32 && rounds >= 1);
  // NOTE [collective construction]: the local word set first, agreed on, then the symmetric pad.
  team_->agree_local("allocating a signal pad's control words", [&] {
    // They run beside kernels that wait for them (NOTE [lazy loading]).
    load_kernel_now(barrier_kernel);
    load_kernel_now(wait_kernel);
    load_kernel_now(raise_kernel);
    control_ = DeviceBuffer(sizeof(uint64_t) * (1 + static_cast<size_t>(rounds)));
    team_->zero_now(control_.get(), control_.bytes());
  });
  const size_t groups = static_cast<size_t>(num_barriers + num_families);
  pad_ = SymmetricBuffer(team_, std::max<size_t>(groups, 1) * team_->world * sizeof(uint64_t), what);
}

int SignalPad::world() const { return team_->world; }

void SignalPad::barrier(int index, cudaStream_t stream) const {
  barrier_kernel<<<1, 32, 0, stream>>>(reinterpret_cast<uint64_t* const*>(pad_.device_peers()), index, team_->world,
                                       control_.as<uint64_t>(), rounds_, index == 0, team_->wait_env());
  TPGEMM_CHECK_LAUNCH();
}

uint64_t* SignalPad::slot_at(int family, int peer) const {
  return static_cast<uint64_t*>(pad_.peer(peer)) + (num_barriers_ + family) * team_->world + team_->rank;
}

void SignalPad::signal(int family, int peer, int round, cudaStream_t stream) const {
  TPGEMM_CUDA_CHECK(
      cudaMemcpyAsync(slot_at(family, peer), seq() + round, sizeof(uint64_t), cudaMemcpyDeviceToDevice, stream));
}

void SignalPad::raise(int family, int peer, int round, cudaStream_t stream) const {
  raise_kernel<<<1, 1, 0, stream>>>(slot_at(family, peer), seq(), round);
  TPGEMM_CHECK_LAUNCH();
}

void SignalPad::wait(int family, int peer, int round, WaitSite site, cudaStream_t stream) const {
  wait_kernel<<<1, 32, 0, stream>>>(family_slots(family) + peer, seq(), round, peer, site, team_->wait_env());
  TPGEMM_CHECK_LAUNCH();
}

const uint64_t* SignalPad::family_slots(int family) const {
  return static_cast<const uint64_t*>(pad_.local()) + (num_barriers_ + family) * team_->world;
}

}  // namespace tpgemm::comm
