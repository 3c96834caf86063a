// Flags in symmetric memory, and the small kernels and copies that raise and wait for them.
//
// NOTE [signal pad layout]
// One symmetric buffer of uint64 flags per plan, in groups of W slots:
//   [barrier 0 .. barrier B-1][family 0 .. family F-1]
// Slot (group g, source q) is element g * W + q; rank q writes only slot q of a peer's pad,
// so no two ranks ever write the same word. Beside it, in local device memory: the plan's
// epoch (bumped once per call by barrier 0) and seq[j] = (epoch - 1) * rounds + j + 1, the
// value that round j's flags carry (NOTE [schedule model] in src/plan/schedule.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "comm/device/wait_env.h"
#include "comm/symmetric.h"
#include "core/cuda_raii.h"

namespace tpgemm::comm {

class SignalPad {
 public:
  SignalPad() = default;
  // Collective.
  SignalPad(std::shared_ptr<detail::TeamState> team, int num_barriers, int num_families, int rounds, const char* what);
  SignalPad(SignalPad&&) noexcept = default;
  SignalPad& operator=(SignalPad&&) noexcept = default;

  // A barrier of all ranks on `stream` (one small kernel, bounded). Barrier 0 of a call bumps
  // the epoch first, so it must come before any flag of that call.
  void barrier(int index, cudaStream_t stream) const;
  // Raise family `family` of round `round` in `peer`'s pad: a copy-engine write of seq[round],
  // ordered after the copies before it on the stream.
  void signal(int family, int peer, int round, cudaStream_t stream) const;
  // The same from one thread on the SMs. A copy-engine write queues behind every transfer the
  // engine holds, other streams' too; after a kernel that holds up a flag by tens of microseconds.
  void raise(int family, int peer, int round, cudaStream_t stream) const;
  // Wait (one small kernel, bounded) until `peer` has raised family `family` of round `round` here.
  void wait(int family, int peer, int round, WaitSite site, cudaStream_t stream) const;

  // For kernels that wait on flags themselves: this rank's slots of a family, and seq.
  const uint64_t* family_slots(int family) const;
  const uint64_t* seq() const { return control_.as<uint64_t>() + 1; }
  int world() const;

 private:
  // This rank's slot of family `family` in `peer`'s pad.
  uint64_t* slot_at(int family, int peer) const;

  std::shared_ptr<detail::TeamState> team_;
  SymmetricBuffer pad_;
  DeviceBuffer control_;  // uint64: [0] epoch, [1 + j] seq[j]
  int num_barriers_ = 0;
  int rounds_ = 1;
};

}  // namespace tpgemm::comm
