#include "ops/allreduce/symm_allreduce.h"

#include <algorithm>

#include "comm/team_state.h"
#include "core/check.h"

namespace tpgemm::ops {

SymmAllReduce::SymmAllReduce(std::shared_ptr<detail::TeamState> team, int64_t count, DType dtype, bool two_shot,
                             bool in_place)
    : team_(std::move(team)), count_(count), dtype_(dtype), two_shot_(two_shot) {
  detail::TeamState& t = *team_;
  TPGEMM_ASSERT(count % 8 == 0 && t.world <= 32 && t.all_lsa);
  constexpr int kThreads = 512;
  const int64_t vecs = count / 8;
  const int64_t wanted = std::max<int64_t>(1, (vecs + kThreads - 1) / kThreads);
  // NOTE [collective construction]: local work first, agreed on, then the symmetric buffers.
  t.agree_local("allocating the all-reduce's local workspace", [&] {
    blocks_ = static_cast<int>(std::min<int64_t>(wanted, two_shot ? twoshot_max_blocks(dtype, t.num_sms) : t.num_sms * 2));
    control_ = DeviceBuffer(3 * sizeof(uint64_t));
    TPGEMM_CUDA_CHECK(cudaMemset(control_.get(), 0, control_.bytes()));
    if (in_place && !two_shot) scratch_ = DeviceBuffer(static_cast<size_t>(count) * dtype_size(dtype));
  });
  buffer_ = comm::SymmetricBuffer(team_, static_cast<size_t>(count) * dtype_size(dtype), "all-reduce input");
  pad_ = comm::SymmetricBuffer(team_, 3 * sizeof(uint64_t) * static_cast<size_t>(t.world), "all-reduce flags");
}

void SymmAllReduce::run(void* out, const void* c, float beta, cudaStream_t stream) const {
  TPGEMM_ASSERT(!(out == input() && (c != nullptr || (!two_shot_ && scratch_.get() == nullptr))));
  const bool staged = out == input() && !two_shot_;
  SymmAllReduceArgs a;
  a.bufs = buffer_.device_peers();
  a.pads = reinterpret_cast<uint64_t* const*>(pad_.device_peers());
  a.control = control_.as<uint64_t>();
  a.count = count_;
  a.out = staged ? scratch_.get() : out;
  a.out_is_input = out == input();
  a.c = c;
  a.beta = beta;
  a.world = team_->world;
  a.env = team_->wait_env();
  if (two_shot_) launch_twoshot(a, dtype_, blocks_, stream);
  else launch_oneshot(a, dtype_, blocks_, stream);
  if (staged)
    TPGEMM_CUDA_CHECK(cudaMemcpyAsync(out, scratch_.get(), scratch_.bytes(), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace tpgemm::ops
