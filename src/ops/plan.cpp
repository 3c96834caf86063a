#include "tpgemm/plan.h"

#include <array>
#include <string>

#include "core/check.h"
#include "ops/op_impl.h"
#include "plan/choose.h"
#include "plan/problem.h"

namespace tpgemm {
namespace detail {

struct PlanState {
  std::shared_ptr<TeamState> team;
  uint64_t id = 0;  // TeamState::plans_made when it was made
  GemmProblem problem;
  plan::Choice choice;
  std::unique_ptr<OpImpl> impl;
  bool return_gathered_a = false;              // PlanOptions::return_gathered_a
  std::array<const void*, 5> device_memory{};  // A, B, C, D, A gathered as last found this GPU's (check_device_memory)
};

namespace {

const PlanState& live(const std::unique_ptr<PlanState>& s, const char* what) {
  if (s == nullptr) throw Error(ErrorCode::kInvalidArgument, strfmt("%s on a moved-from Plan", what));
  return *s;
}

plan::Topology topology(const TeamState& t) { return {t.world, t.all_lsa, t.all_sm90}; }

Status check_locally(const TeamState& t, const GemmProblem& p, const PlanOptions& o) {
  Status s = plan::validate_problem(p, t.world);
  if (s.ok()) s = plan::impl_supported(p, o.impl, topology(t));
  if (s.ok() && (o.chunks_per_rank < 0 || o.chunks_per_rank > 64))
    s = {ErrorCode::kInvalidArgument, strfmt("chunks_per_rank=%d: expected 0 (auto) to 64", o.chunks_per_rank)};
  if (s.ok() && o.return_gathered_a) s = plan::gathered_a_supported(p, o.impl);
  const bool pipelined = o.impl == Impl::kPipelinedCE || o.impl == Impl::kAuto;
  if (s.ok() && p.shard_dim == ShardDim::kN && pipelined && o.chunks_per_rank > 1)
    s = {ErrorCode::kInvalidArgument, strfmt("chunks_per_rank=%d with shard_dim=n: along N each rank's column block "
                                             "moves whole (NOTE [shard along N]); expected 0 or 1",
                                             o.chunks_per_rank)};
  if (s.ok() && (o.comm_sms < -1 || o.comm_sms >= t.num_sms))
    s = {ErrorCode::kInvalidArgument,
         strfmt("comm_sms=%d: expected -1 (auto) or 0 to %d (this GPU has %d SMs)", o.comm_sms, t.num_sms - 1, t.num_sms)};
  return s;
}

std::unique_ptr<OpImpl> make_impl(const ImplContext& ctx) {
  switch (ctx.choice.impl) {
    case Impl::kBaseline:
      switch (ctx.problem.op) {
        case Op::kAgGemm: return make_ag_gemm_baseline(ctx);
        case Op::kGemmRs: return make_gemm_rs_baseline(ctx);
        case Op::kGemmAr: return make_gemm_ar_baseline(ctx);
      }
      break;
    case Impl::kPipelinedCE: return make_pipelined_ce(ctx);
    case Impl::kFused:
      if (ctx.problem.op == Op::kAgGemm) return make_ag_gemm_fused(ctx);
      return plan::fused_ar_decode(ctx.problem, ctx.team->world) ? make_gemm_ar_fused_decode(ctx) : make_fused_tile_reduce(ctx);
    case Impl::kNaiveRemote: return make_ag_gemm_naive_remote(ctx);
    case Impl::kThreadloadGather: return make_ag_gemm_threadload_gather(ctx);
    case Impl::kGatherThenGemm: return make_ag_gemm_gather_then_gemm(ctx);
    case Impl::kGemmOneShot:
    case Impl::kGemmTwoShot: return make_gemm_ar_symmetric(ctx);
    case Impl::kGemmReduceScatter: return make_gemm_rs_reducescatter(ctx);
    case Impl::kAllGatherGemm: return make_ag_gemm_allgather(ctx);
    case Impl::kAuto: break;
  }
  throw Error(ErrorCode::kInternal, "no implementation was chosen");
}

}  // namespace
}  // namespace detail

Plan::Plan(const Team& team, const GemmProblem& problem, const PlanOptions& options) {
  const auto& t = team.state();
  const uint64_t id = ++t->plans_made;  // first: the same number on every rank, whatever fails
  TPGEMM_CUDA_CHECK(cudaSetDevice(t->device));
  // A failed team is this rank's verdict too: its peers learn it here instead of waiting.
  Status local = t->mailbox->status();
  if (local.ok()) local = detail::check_locally(*t, problem, options);
  // Ranks compare what they were asked for; the choice below is a function of it.
  const std::string descriptor = describe(problem) + strfmt(" impl=%s chunks=%d comm_sms=%d gathered_a=%d",
                                                             std::string(to_string(options.impl)).c_str(),
                                                             options.chunks_per_rank, options.comm_sms,
                                                             options.return_gathered_a ? 1 : 0);
  t->agree(local, descriptor, "the plan");
  auto state = std::make_unique<detail::PlanState>();
  state->team = t;
  state->id = id;
  state->problem = problem;
  state->choice = plan::choose(problem, detail::topology(*t), options);
  state->return_gathered_a = options.return_gathered_a;
  // NOTE [collective construction]: every implementation agrees on its local work before its
  // collective steps, so a failure inside make_impl is either every rank's or caught here by
  // the one rank it happened on; either way all ranks meet in this last agree, which also
  // means every rank's workspace is ready before any call can touch it.
  t->agree_local("building the plan", [&] { state->impl = detail::make_impl({t, problem, state->choice}); });
  state_ = std::move(state);
}

Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

void Plan::run(const Operands& operands, cudaStream_t stream) {
  detail::live(state_, "run()");
  detail::TeamState& t = *state_->team;
  Status mine = t.mailbox->status();  // a failed team stops every rank, not only this one
  if (mine.ok()) mine = plan::validate_operands(state_->problem, t.world, operands, state_->return_gathered_a);
  const std::array<const void*, 5> ptrs = {operands.a, operands.b, state_->problem.has_c ? operands.c : nullptr, operands.d,
                                           state_->return_gathered_a ? operands.a_gathered : nullptr};
  constexpr const char* kNames[] = {"A", "B", "C", "D", "A_gathered"};
  for (size_t i = 0; i < ptrs.size() && mine.ok(); ++i)
    mine = t.check_device_memory(kNames[i], ptrs[i], state_->device_memory[i]);
  if (mine.ok()) {
    // Local work into the plan's own buffers, begun before the rendezvous; a failure there
    // (a bad stream, say) is this rank's verdict, which its peers must hear, not wait for.
    try {
      state_->impl->prologue(operands, stream);
    } catch (const Error& e) {
      mine = e.status();
    }
  }
  t.agree_call(mine, "Plan::run", state_->id);
  state_->impl->run(operands, stream);
}

Impl Plan::impl() const { return detail::live(state_, "impl()").choice.impl; }
const GemmProblem& Plan::problem() const { return detail::live(state_, "problem()").problem; }
PlanOptions Plan::options() const {
  detail::live(state_, "options()");
  PlanOptions o;
  o.impl = state_->choice.impl;
  o.chunks_per_rank = state_->choice.chunks;
  o.comm_sms = state_->choice.comm_sms;
  o.return_gathered_a = state_->return_gathered_a;
  return o;
}

Status Plan::can_implement(const Team& team, const GemmProblem& problem, const PlanOptions& options) {
  return detail::check_locally(*team.state(), problem, options);
}

}  // namespace tpgemm
