// tpgemm::AllReducePlan: NCCL, or the symmetric-memory one-shot / two-shot kernels.
#include "tpgemm/allreduce.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

#include "comm/team_state.h"
#include "core/check.h"
#include "ops/allreduce/allreduce_tuning.h"
#include "ops/allreduce/symm_collective.h"
#include "ops/common/nccl_types.h"
#include "ops/op_impl.h"
#include "plan/allreduce_timings.h"
#include "plan/choose.h"

namespace tpgemm {
namespace detail {

struct AllReduceState {
  std::shared_ptr<TeamState> team;
  uint64_t id = 0;  // TeamState::plans_made when it was made
  int64_t count = 0;
  DType dtype = DType::kBF16;
  AllReduceImpl asked = AllReduceImpl::kAuto;
  // auto's choice by size: the team's timings as this plan was made (NOTE [measured all-reduce]);
  // empty: the rules of plan/choose.cpp.
  plan::AllReduceTimings timings;
  PlanSelection selection;
  // The symmetric algorithms made so far, each with staging for the largest call it takes.
  std::map<AllReduceImpl, std::unique_ptr<ops::SymmCollective>> symm;
  std::array<const void*, 2> device_memory{};  // in, out as last found this GPU's (check_device_memory)
};

namespace {

Status check_allreduce(const TeamState& t, int64_t count, DType dtype, AllReduceImpl impl) {
  if (count < 1 || count > (int64_t(1) << 40))
    return {ErrorCode::kInvalidArgument, strfmt("count=%lld: expected 1 to 2^40 elements", (long long)count)};
  if (dtype != DType::kBF16 && dtype != DType::kFP16)
    return {ErrorCode::kUnsupported, strfmt("dtype %d: expected bf16 or fp16", static_cast<int>(dtype))};
  const bool symmetric = impl == AllReduceImpl::kOneShot || impl == AllReduceImpl::kTwoShot;
  if (symmetric && count % 8 != 0)
    return {ErrorCode::kUnsupported, strfmt("count=%lld with impl=%s: expected a multiple of 8 elements (16-byte "
                                                "vectors); impl=auto runs other counts on NCCL", (long long)count,
                                                std::string(to_string(impl)).c_str())};
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

// `vectors`: the call runs a symmetric kernel, which moves 16-byte vectors.
Status check_allreduce_operands(const void* in, const void* out, size_t bytes, bool vectors) {
  if (in == nullptr || out == nullptr)
    return {ErrorCode::kInvalidArgument, strfmt("all-reduce %s is null: expected a device pointer", in == nullptr ? "in" : "out")};
  if (vectors && (reinterpret_cast<uintptr_t>(in) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0))
    return {ErrorCode::kInvalidArgument, strfmt("all-reduce in=%p out=%p: both must be 16-byte aligned", in, out)};
  const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(out);
  if (a != b && a < b + bytes && b < a + bytes)
    return {ErrorCode::kInvalidArgument, strfmt("all-reduce in=%p and out=%p (%zu bytes each) overlap: expected the same "
                                                "buffer (in place) or disjoint ones", in, out, bytes)};
  return Status::Ok();
}

// The algorithm of a call of `count` elements (NCCL where the symmetric kernels' 16-byte vectors
// do not fit it), and the largest call it takes in plan `s`.
AllReduceImpl algorithm(const AllReduceState& s, int64_t count) {
  const TeamState& t = *s.team;
  if (t.world == 1) return AllReduceImpl::kNccl;  // nothing to exchange
  if (s.asked != AllReduceImpl::kAuto) return s.asked;
  if (count % 8 != 0) return AllReduceImpl::kNccl;
  const int64_t bytes = count * static_cast<int64_t>(dtype_size(s.dtype));
  if (!s.timings.rows.empty()) return plan::route(s.timings, bytes);
  return plan::choose_allreduce(bytes, {t.world, t.all_lsa});
}
int64_t largest_call(const AllReduceState& s, AllReduceImpl algo) {
  if (s.asked != AllReduceImpl::kAuto) return s.count;
  const int64_t es = static_cast<int64_t>(dtype_size(s.dtype));
  const int64_t bytes = !s.timings.rows.empty() ? plan::largest_routed(s.timings, algo, s.count * es)
                                                : plan::allreduce_largest(algo, {s.team->world, s.team->all_lsa});
  return std::min(s.count, bytes / es) / 8 * 8;
}

// Whether auto times its algorithms on this team (NOTE [measured all-reduce]): more than one rank,
// every one an NVLink peer within the symmetric kernels' reach, and tuning not switched off.
bool measures(const TeamState& t, bool tune) {
  return tune && t.world > 1 && t.all_lsa && t.world <= plan::kMaxSymmetricWorld;
}

Status check_call_count(const AllReduceState& s, int64_t count) {
  if (count < 1 || count > s.count)
    return {ErrorCode::kInvalidArgument, strfmt("all-reduce count=%lld: expected 1 to the plan's %lld", (long long)count,
                                                (long long)s.count)};
  if (count % 8 != 0 && algorithm(s, count) != AllReduceImpl::kNccl)
    return {ErrorCode::kUnsupported, strfmt("all-reduce count=%lld with impl=%s: expected a multiple of 8 "
                                                "(16-byte vectors); impl=auto runs other counts on NCCL",
                                                (long long)count, std::string(to_string(s.asked)).c_str())};
  return Status::Ok();
}

// Whether the symmetric algorithm of calls of `count` is still to be made.
bool needs_making(const AllReduceState& s, int64_t count) {
  const AllReduceImpl algo = algorithm(s, count);
  return algo != AllReduceImpl::kNccl && s.symm.count(algo) == 0;
}

// Algorithm `algo` of plan `s` with its staging (collective).
std::unique_ptr<ops::SymmCollective> build(const AllReduceState& s, AllReduceImpl algo) {
  return std::make_unique<ops::SymmCollective>(s.team, largest_call(s, algo), s.dtype,
                                               algo == AllReduceImpl::kTwoShot ? ops::SymmAlgo::kTwoShot
                                                                                : ops::SymmAlgo::kOneShot);
}

// Makes the algorithm of calls of `count` (collective): the ranks first agree on `mine` (a bad
// verdict anywhere throws on every rank, before anything is made); kept only where every rank
// made it.
void make_algorithm(AllReduceState& s, int64_t count, const Status& mine) {
  TeamState& t = *s.team;
  const DeviceScope device(t.device);  // it allocates on the plan's GPU, whatever the caller's current one
  const AllReduceImpl algo = algorithm(s, count);
  // The ranks agree on the verdict and the algorithm first: through the host rendezvous where
  // they are all on this host (a peer in another call fails every rank at once, naming both).
  const std::string what = strfmt("making the all-reduce's %s for up to %lld elements",
                                  std::string(to_string(algo)).c_str(), (long long)largest_call(s, algo));
  t.agree_step(mine, what, s.id, "an algorithm of the all-reduce plan");
  std::unique_ptr<ops::SymmCollective> made;
  t.agree_local("making an algorithm of the all-reduce plan", [&] { made = build(s, algo); });  // NOTE [collective construction]
  s.symm[algo] = std::move(made);
}

}  // namespace
}  // namespace detail

AllReducePlan::AllReducePlan(const Team& team, int64_t count, DType dtype, AllReduceImpl impl,
                             PlanOptions::Tune tuning) {
  const auto& t = team.state();
  const uint64_t id = ++t->plans_made;  // first: the same number on every rank, whatever fails
  const DeviceScope device(t->device);  // the plan's GPU while it is made; the caller's current one after
  Status local = t->failure();
  if (local.ok()) local = detail::check_allreduce(*t, count, dtype, impl);
  const bool tune = detail::resolve_tune(tuning) == PlanOptions::Tune::kOn;
  const std::string descriptor = strfmt("allreduce count=%lld %s impl=%s%s", (long long)count,
                                        std::string(to_string(dtype)).c_str(), std::string(to_string(impl)).c_str(),
                                        tune ? "" : " tune=off") +
                                 detail::protocol_settings();
  t->agree(local, descriptor, "the all-reduce plan");
  auto state = std::make_unique<detail::AllReduceState>();
  state->team = t;
  state->id = id;
  state->count = count;
  state->dtype = dtype;
  state->asked = impl;
  PlanSelection& sel = state->selection;
  if (impl != AllReduceImpl::kAuto) {
    sel.detail = "AllReducePlan's impl";
  } else if (!detail::measures(*t, tune)) {
    sel.source = PlanSelection::Source::kFallback;
    sel.detail = t->world == 1 ? "one rank: nccl"
                 : !tune       ? "the rules of plan/choose.cpp: tuning off (tune, TPGEMM_TUNE)"
                               : "the rules of plan/choose.cpp: no symmetric kernels on this team";
  } else {
    const int64_t bytes = count * static_cast<int64_t>(dtype_size(dtype));
    try {
      // Collective, the same table everywhere; under one agreement, as the GEMM planner's (a
      // failure on one rank alone stops every rank's timing: NOTE [agreement]).
      t->agree_local("timing the all-reduce's algorithms",
                     [&] { sel.tuning_ms = detail::measure_allreduce(t, dtype, bytes); });
      state->timings = t->allreduce_timings;
      sel.source = PlanSelection::Source::kTuned;
      sel.detail = plan::describe(state->timings, bytes);
    } catch (const Error& e) {
      // Agreed on (above), so every rank is here alike: the rules decide.
      if (t->has_failed()) throw;
      sel.source = PlanSelection::Source::kFallback;
      sel.detail = std::string("the rules of plan/choose.cpp: timing failed: ") + e.what();
      if (t->rank == 0) std::fprintf(stderr, "tpgemm: warning: the all-reduce's %s\n", sel.detail.c_str());
    }
  }
  const AllReduceImpl own = detail::algorithm(*state, count);  // the plan's own message's
  t->agree_local("building the all-reduce plan", [&] {  // NOTE [collective construction]
    if (own != AllReduceImpl::kNccl) state->symm[own] = detail::build(*state, own);
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

void AllReducePlan::prepare(int64_t count) {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "prepare() on a moved-from AllReducePlan");
  detail::AllReduceState& s = *state_;
  const Status count_ok = detail::check_call_count(s, count);
  if (!count_ok.ok()) throw Error(count_ok);  // (a peer that goes on to make an algorithm waits, bounded, and names this rank)
  // (every rank: the same algorithms) A failed team's rank still joins the making, so that its
  // peers hear of the failure there instead of waiting for it.
  if (detail::needs_making(s, count)) return detail::make_algorithm(s, count, s.team->failure());
  if (const Status failed = s.team->failure(); !failed.ok()) throw Error(failed);
}

void AllReducePlan::run(const void* in, void* out, int64_t count, cudaStream_t stream) {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "run() on a moved-from AllReducePlan");
  detail::AllReduceState& s = *state_;
  detail::TeamState& t = *s.team;
  const DeviceScope device(t.device);
  Status mine = t.failure();  // a failed team stops every rank, not only this one
  const Status count_ok = detail::check_call_count(s, count);
  if (mine.ok()) mine = count_ok;
  // Capture first, whatever the verdict, so that ranks which all capture describe their call alike.
  bool capturing = false;
  if (const Status q = t.check_stream(stream, &capturing); mine.ok()) mine = q;
  AllReduceImpl algo = count_ok.ok() ? detail::algorithm(s, count) : AllReduceImpl::kNccl;
  if (mine.ok())
    mine = detail::check_allreduce_operands(in, out, static_cast<size_t>(count) * dtype_size(s.dtype),
                                            /*vectors=*/algo != AllReduceImpl::kNccl);
  if (mine.ok()) mine = t.check_device_memory("in", in, s.device_memory[0]);
  if (mine.ok()) mine = t.check_device_memory("out", out, s.device_memory[1]);
  // Under capture nothing can be made (it allocates): the call runs the plan's own algorithm,
  // made with the plan for its whole count (or NCCL). prepare() first captures the faster one.
  const bool unmade = count_ok.ok() && detail::needs_making(s, count), make = unmade && !capturing;
  if (t.collective_calls) {  // the ranks compare the plan, the call's count and capture (any difference fails every rank)
    const std::string what = strfmt("AllReducePlan::run with count=%lld%s", (long long)count, capturing ? " captured" : "");
    t.agree_call(mine, what.c_str(), s.id);
  } else if (!mine.ok() && make) {
    detail::make_algorithm(s, count, mine);  // its peers are about to make it: they hear of this rank's failure there
  } else {
    t.agree_call(mine, "AllReducePlan::run", s.id);
  }
  if (make) {
    detail::make_algorithm(s, count, Status::Ok());  // collective, like the plan
  } else if (unmade) {  // (capturing)
    algo = detail::algorithm(s, s.count);
  }
  const auto it = s.symm.find(algo);
  if (it == s.symm.end()) {
    TPGEMM_NCCL_CHECK(ncclAllReduce(in, out, static_cast<size_t>(count), ops::nccl_type(s.dtype), ncclSum, t.comm, stream));
    return;
  }
  it->second->run(in, out, nullptr, 0.0f, stream, count);  // copies `in` into symmetric memory itself
}

AllReduceImpl AllReducePlan::impl() const { return impl(count()); }
AllReduceImpl AllReducePlan::impl(int64_t count) const {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "impl() on a moved-from AllReducePlan");
  if (count < 1 || count > state_->count)
    throw Error(ErrorCode::kInvalidArgument, strfmt("AllReducePlan::impl(count=%lld): expected 1 to the plan's %lld",
                                                    (long long)count, (long long)state_->count));
  return detail::algorithm(*state_, count);
}
int64_t AllReducePlan::count() const {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "count() on a moved-from AllReducePlan");
  return state_->count;
}
const PlanSelection& AllReducePlan::selection() const {
  if (state_ == nullptr) throw Error(ErrorCode::kInvalidArgument, "selection() on a moved-from AllReducePlan");
  return state_->selection;
}

}  // namespace tpgemm
