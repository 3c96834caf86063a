// tpgemm::AllReducePlan: NCCL, or the symmetric-memory one-shot / two-shot kernels.
#include "tpgemm/allreduce.h"

#include <array>

#include "comm/team_state.h"
#include "core/check.h"
#include "ops/allreduce/symm_collective.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"
#include "plan/choose.h"

namespace tpgemm {
namespace detail {

struct AllReduceState {
  std::shared_ptr<TeamState> team;
  uint64_t id = 0;  // TeamState::plans_made when it was made
  int64_t count = 0;
  DType dtype = DType::kBF16;
  AllReduceImpl impl = AllReduceImpl::kNccl;
  std::unique_ptr<ops::SymmCollective> symm;
  std::array<const void*, 2> device_memory{};  // in, out as last found this GPU's (check_device_memory)
};

namespace {

Status check_allreduce(const TeamState& t, int64_t count, DType dtype, AllReduceImpl impl) {
  if (count < 1 || count % 8 != 0 || count > (int64_t(1) << 40))
    return {ErrorCode::kInvalidArgument, strfmt("count=%lld: expected a positive multiple of 8 elements (16-byte vectors), at most 2^40", (long long)count)};
  if (dtype != DType::kBF16 && dtype != DType::kFP16)
    return {ErrorCode::kUnsupported, strfmt("dtype %d: expected bf16 or fp16", static_cast<int>(dtype))};
  const bool symmetric = impl == AllReduceImpl::kOneShot || impl == AllReduceImpl::kTwoShot;
  if (symmetric && t.world > plan::kMaxSymmetricWorld)
    return {ErrorCode::kUnsupported, strfmt("all-reduce impl %s supports up to %d ranks; this team has %d; use nccl",
                                            std::string(to_string(impl)).c_str(), plan::kMaxSymmetricWorld, t.world)};
  if (symmetric && t.world > 1 && !t.all_lsa)
    return {ErrorCode::kUnsupported, strfmt("all-reduce impl %s needs every rank to be an NVLink (LSA) peer; this team of %d "
                                            "ranks has %d; use nccl", std::string(to_string(impl)).c_str(), t.world, t.lsa_size)};
  if (impl != AllReduceImpl::kAuto && impl != AllReduceImpl::kNccl && impl != AllReduceImpl::kOneShot &&
      impl != AllReduceImpl::kTwoShot)
    return {ErrorCode::kUnsupported, strfmt("all-reduce impl %d: unknown", static_cast<int>(impl))};
  return Status::Ok();
}

Status check_allreduce_operands(const void* in, const void* out, size_t bytes) {
  if (in == nullptr || out == nullptr)
    return {ErrorCode::kInvalidArgument, strfmt("all-reduce %s is null: expected a device pointer", in == nullptr ? "in" : "out")};
  if (reinterpret_cast<uintptr_t>(in) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0)
    return {ErrorCode::kInvalidArgument, strfmt("all-reduce in=%p out=%p: both must be 16-byte aligned", in, out)};
  const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
  if (a != b && a < b + bytes && b < a + bytes)
    return {ErrorCode::kInvalidArgument, strfmt("all-reduce in=%p and out=%p (%zu bytes each) overlap: expected the same "
                                                "buffer (in place) or disjoint ones", in, out, bytes)};
  return Status::Ok();
}

}  // namespace
}  // namespace detail

AllReducePlan::AllReducePlan(const Team& team, int64_t count, DType dtype, AllReduceImpl impl) {
  const auto& t = team.state();
  const uint64_t id = ++t->plans_made;  // first: the same number on every rank, whatever fails
  TPGEMM_CUDA_CHECK(cudaSetDevice(t->device));
  Status local = t->failure();
  if (local.ok()) local = detail::check_allreduce(*t, count, dtype, impl);
  const std::string descriptor = strfmt("allreduce count=%lld %s impl=%s", (long long)count,
                                        std::string(to_string(dtype)).c_str(), std::string(to_string(impl)).c_str()) +
                                 detail::protocol_settings();
  t->agree(local, descriptor, "the all-reduce plan");
  AllReduceImpl chosen = impl;
  if (impl == AllReduceImpl::kAuto)
    chosen = plan::choose_allreduce(count * static_cast<int64_t>(dtype_size(dtype)), {t->world, t->all_lsa});
  if (t->world == 1) chosen = AllReduceImpl::kNccl;  // nothing to exchange
  auto state = std::make_unique<detail::AllReduceState>();
  state->team = t;
  state->id = id;
  state->count = count;
  state->dtype = dtype;
  state->impl = chosen;
  t->agree_local("building the all-reduce plan", [&] {  // NOTE [collective construction]
    if (chosen != AllReduceImpl::kNccl)
      state->symm = std::make_unique<ops::SymmCollective>(
          t, count, dtype, chosen == AllReduceImpl::kTwoShot ? ops::SymmAlgo::kTwoShot : ops::SymmAlgo::kOneShot);
  });
  state_ = std::move(state);
}

AllReducePlan::~AllReducePlan() = default;
AllReducePlan::AllReducePlan(AllReducePlan&&) noexcept = default;
AllReducePlan& AllReducePlan::operator=(AllReducePlan&&) noexcept = default;

void AllReducePlan::run(const void* in, void* out, cudaStream_t stream) {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "run() on a moved-from AllReducePlan");
  run(in, out, state_->count, stream);
}

void AllReducePlan::run(const void* in, void* out, int64_t count, cudaStream_t stream) {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "run() on a moved-from AllReducePlan");
  detail::AllReduceState& s = *state_;
  detail::TeamState& t = *s.team;
  Status mine = t.failure();  // a failed team stops every rank, not only this one
  if (mine.ok() && (count < 1 || count > s.count || count % 8 != 0))
    mine = {ErrorCode::kInvalidArgument, strfmt("all-reduce count=%lld: expected a positive multiple of 8 up to the "
                                                "plan's %lld", (long long)count, (long long)s.count)};
  if (mine.ok()) mine = detail::check_allreduce_operands(in, out, static_cast<size_t>(count) * dtype_size(s.dtype));
  if (mine.ok()) mine = t.check_device_memory("in", in, s.device_memory[0]);
  if (mine.ok()) mine = t.check_device_memory("out", out, s.device_memory[1]);
  t.agree_call(mine, "AllReducePlan::run", s.id);
  if (s.impl == AllReduceImpl::kNccl) {
    TPGEMM_NCCL_CHECK(ncclAllReduce(in, out, static_cast<size_t>(count), ops::nccl_type(s.dtype), ncclSum, t.comm, stream));
    return;
  }
  s.symm->run(in, out, nullptr, 0.0f, stream, count);  // copies `in` into symmetric memory itself
}

AllReduceImpl AllReducePlan::impl() const { return state_ ? state_->impl : AllReduceImpl::kNccl; }
int64_t AllReducePlan::count() const { return state_ ? state_->count : 0; }

}  // namespace tpgemm
