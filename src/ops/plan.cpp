#include "tpgemm/plan.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "core/check.h"
#include "core/env.h"
#include "ops/call_graphs.h"
#include "ops/op_impl.h"
#include "ops/tuner.h"
#include "plan/choose.h"
#include "plan/problem.h"
#include "plan/tune_cache.h"

namespace tpgemm {
namespace detail {

// One implementation of the plan's op, made for `m` rows: the plan's own (the problem's M), or a
// range of smaller calls (Plan::run).
struct Route {
  plan::Choice choice;
  std::unique_ptr<OpImpl> impl;
  PlanSelection selection;
  CallGraphs graphs;  // NOTE [call graphs]; after impl: destroyed before it
};

struct PlanState {
  std::shared_ptr<TeamState> team;
  uint64_t id = 0;  // TeamState::plans_made when it was made
  GemmProblem problem;
  PlanOptions asked;  // with `tune` resolved
  Route main;
  std::map<int64_t, Route> ranges;  // by the top of the range (plan::range_top)
  bool return_gathered_a = false;              // PlanOptions::return_gathered_a
  // A, B, C, D, A gathered, the e4m3 scales as last found this GPU's (check_device_memory).
  std::array<const void*, 7> device_memory{};
  bool call_graphs = false;  // NOTE [call graphs]: TPGEMM_CALL_GRAPHS when the plan was made
  std::string protocol;      // protocol_settings() as the ranks agreed on them
};

namespace {

const PlanState& live(const std::unique_ptr<PlanState>& s, const char* what) {
  if (s == nullptr) throw Error(ErrorCode::kInvalidArgument, strfmt("%s on a moved-from Plan", what));
  return *s;
}

plan::Topology topology(const TeamState& t) { return {t.world, t.all_lsa, t.all_sm90, t.num_sms, t.fp8}; }

Status check_locally(const TeamState& t, const GemmProblem& p, const PlanOptions& o) {
  Status s = plan::validate_problem(p, t.world);
  if (s.ok()) s = plan::impl_supported(p, o.impl, topology(t));
  if (s.ok() && (o.chunks_per_rank < 0 || o.chunks_per_rank > 64))
    s = {ErrorCode::kInvalidArgument, strfmt("chunks_per_rank=%d: expected 0 (auto) to 64", o.chunks_per_rank)};
  if (s.ok() && o.return_gathered_a) s = plan::gathered_a_supported(p, o.impl);
  if (s.ok() && o.deterministic)  // auto: what the rules choose must be kept to a fixed order too
    s = plan::deterministic_supported(p, plan::choose(p, topology(t), o).impl, t.world);
  const bool pipelined = o.impl == Impl::kPipelinedCE || o.impl == Impl::kAuto;
  if (s.ok() && p.shard_dim == ShardDim::kN && pipelined && o.chunks_per_rank > 1)
    s = {ErrorCode::kInvalidArgument, strfmt("chunks_per_rank=%d with shard_dim=n: along N each rank's column block "
                                             "moves whole (NOTE [shard along N]); expected 0 or 1",
                                             o.chunks_per_rank)};
  if (s.ok() && (o.comm_sms < -1 || o.comm_sms >= t.num_sms))
    s = {ErrorCode::kInvalidArgument,
         strfmt("comm_sms=%d: expected -1 (auto) or 0 to %d (the team's GPUs have %d SMs or more)", o.comm_sms,
                t.num_sms - 1, t.num_sms)};
  if (s.ok() && (static_cast<int>(o.matmul) < 0 || static_cast<int>(o.matmul) > static_cast<int>(Matmul::kSm90)))
    s = {ErrorCode::kInvalidArgument, strfmt("matmul=%d: expected kAuto, kCublasLt or kSm90", static_cast<int>(o.matmul))};
  if (s.ok() && o.matmul != Matmul::kAuto && !pipelined)
    s = {ErrorCode::kInvalidArgument,
         strfmt("matmul=%s with impl=%s: only pipelined_ce's matmuls can be chosen (the other implementations have "
                "their own); expected matmul=auto, or impl=pipelined_ce or auto",
                std::string(to_string(o.matmul)).c_str(), std::string(to_string(o.impl)).c_str())};
  if (s.ok() && o.matmul == Matmul::kSm90 && pipelined && !plan::pipelined_core_possible(p, topology(t)))
    s = {ErrorCode::kUnsupported,
         strfmt("matmul=sm90: the Hopper GEMM core runs pipelined_ce's matmuls along M, A stored [M, K], bf16 or "
                "fp16 in and out, N and K multiples of 8, on sm_90 GPUs, and the problem is %s; use matmul=cublaslt "
                "or auto",
                describe(p).c_str())};
  if (s.ok()) {
    try {  // read by the tuner, where a bad value would only make it give way to the rules
      tune_budget_ms();
    } catch (const Error& e) {
      s = e.status();
    }
  }
  if (s.ok() && (o.tune != PlanOptions::Tune::kDefault && o.tune != PlanOptions::Tune::kOn &&
                 o.tune != PlanOptions::Tune::kOff))
    s = {ErrorCode::kInvalidArgument, strfmt("tune=%d: expected kDefault, kOn or kOff", static_cast<int>(o.tune))};
  return s;
}

}  // namespace

// The environment settings that change what ranks exchange (kernel geometry, tile grouping, which
// rows the fused kernel reads where): every rank must run with the same ones.
// Numbers as parsed ("01" is 1), and a switch at 0 as unset: ranks compare behaviour, not spelling.
std::string protocol_settings() {
  struct Setting {
    const char* name;
    bool is_switch;  // 0 (off) is the same as unset
  };
  std::string out;
  for (const Setting s : {Setting{"TPGEMM_SYMM_THREADS", false}, Setting{"TPGEMM_TILE_GROUP", false},
                          Setting{"TPGEMM_FUSED_AG_OWN_IN_PLACE", true}, Setting{"TPGEMM_DECODE_TWO_SHOT", true},
                          Setting{"TPGEMM_PIPELINED_DIRECT", true}})
    if (const auto v = env_string(s.name)) {
      const auto n = parse_int(*v);  // (a malformed value is refused where it is read)
      if (n && *n == 0 && s.is_switch) continue;
      out += n ? strfmt(" %s=%lld", s.name, static_cast<long long>(*n)) : strfmt(" %s=%s", s.name, v->c_str());
    }
  return out;
}

namespace {

// What the tuning cache's keys take from this process beside the problem (plan::TuneContext::
// timing): the libraries' versions, and the settings that change timings but no protocol.
std::string timing_context() {
  int runtime = 0, driver = 0;
  TPGEMM_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  TPGEMM_CUDA_CHECK(cudaDriverGetVersion(&driver));
  std::string out = strfmt(" cublaslt=%zu cudart=%d driver=%d", cublasLtGetVersion(), runtime, driver);
  for (const char* name : {"TPGEMM_SM90_CONFIG", "TPGEMM_SM90_RASTER", "TPGEMM_SM90_SWIZZLE", "TPGEMM_SYMM_PDL",
                           "TPGEMM_CALL_GRAPHS", "NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_MIN_NCHANNELS",
                           "NCCL_MAX_NCHANNELS", "CUDA_DEVICE_MAX_CONNECTIONS"})
    if (const auto v = env_string(name)) out += strfmt(" %s=%s", name, v->c_str());
  return out;
}

}  // namespace

PlanOptions::Tune resolve_tune(PlanOptions::Tune asked) {
  if (asked != PlanOptions::Tune::kDefault) return asked;
  return tuning_switched_off() ? PlanOptions::Tune::kOff : PlanOptions::Tune::kOn;
}

namespace {

void warn(const TeamState& t, const std::string& what) {
  if (t.rank == 0) std::fprintf(stderr, "tpgemm: warning: %s\n", what.c_str());
}

// Rank 0's tuning-cache entry for `key`, the same on every rank (collective), if it is one of the
// candidates: a file that names something else is not trusted.
std::optional<plan::Choice> cached_choice(TeamState& t, const std::string& key, const std::vector<plan::Choice>& cands,
                                          const plan::TuneCache& cache) {
  int32_t entry[4] = {-1, 0, 0, 0};
  if (t.rank == 0) {
    std::vector<std::string> warnings;
    if (const auto c = cache.find(key, warnings))
      entry[0] = static_cast<int32_t>(c->impl), entry[1] = c->chunks, entry[2] = c->comm_sms,
      entry[3] = static_cast<int32_t>(c->matmul);
    for (const std::string& w : warnings) warn(t, w);
  }
  std::memcpy(entry, t.allgather(entry, sizeof(entry), "the tuning cache's entry")[0].data(), sizeof(entry));
  if (entry[0] < 0) return std::nullopt;
  const plan::Choice stored{static_cast<Impl>(entry[0]), entry[1], entry[2], static_cast<Matmul>(entry[3])};
  for (const plan::Choice& c : cands)
    if (c == stored) return c;
  warn(t, strfmt("tuning cache %s: the entry for \"%s\" (impl %d, chunks %d, comm_sms %d, matmul %d) is none of the "
                 "planner's candidates; ignored",
                 cache.path().c_str(), key.c_str(), entry[0], entry[1], entry[2], entry[3]));
  return std::nullopt;
}

// NOTE [measured core config]: a deterministic plan keeps the core's configurations the same in
// every process (the rule), as `tune = kOff` does.
bool measures_core(const PlanOptions& o) { return o.tune == PlanOptions::Tune::kOn && !o.deterministic; }

// Makes the route of problem `p` (the plan's, or one range's: `any_m`). Collective; every rank
// passes the same arguments (they were agreed on).
Route make_route(const std::shared_ptr<TeamState>& team, const GemmProblem& p, const PlanOptions& o, bool any_m) {
  TeamState& t = *team;
  const plan::Topology topo = topology(t);
  Route r;
  if (o.impl != Impl::kAuto) {
    r.choice = plan::choose(p, topo, o);
    r.selection.detail = "PlanOptions::impl";
  } else {
    const std::vector<plan::Choice> cands = plan::candidates(p, topo, o, any_m);
    const bool tune = o.tune == PlanOptions::Tune::kOn && cands.size() > 1;
    const std::string key =  // (read and written only where the plan is tuned)
        tune ? plan::tune_key({t.device_name, t.nccl_version, topo, protocol_settings(), timing_context()}, p, o, any_m,
                              cands)
             : std::string();
    const plan::TuneCache cache(plan::TuneCache::default_path());
    std::optional<plan::Choice> hit = tune ? cached_choice(t, key, cands, cache) : std::nullopt;
    if (hit) {
      r.choice = *hit;
      r.selection = {PlanSelection::Source::kCached, "tuning cache " + cache.path(), 0};
    }
    std::string not_tuned = cands.size() <= 1 ? "one candidate" : "tuning off (PlanOptions::tune, TPGEMM_TUNE)";
    if (!hit && tune) {
      try {
        // One agreement around all of it: an error on one rank alone (NCCL's asynchronous one
        // that t.check() finds, a bad TPGEMM_TUNE_BUDGET_MS) meets its peers' next step there and
        // stops them too (NOTE [agreement]), so no rank goes on to the rules while the others
        // still time.
        // A range's calls are timed at its middle M: its choice serves Ms from about half its top.
        const int64_t call_m = any_m ? plan::range_middle(p, t.world) : 0;
        Measured m;
        t.agree_local("tuning the plan",
                      [&] { m = measure(team, p, cands, o.return_gathered_a, measures_core(o), call_m); });
        r.choice = m.choice;  // built below, afresh (NOTE [measured planner])
        r.selection = {PlanSelection::Source::kTuned, m.table, m.tuning_ms};
      } catch (const Error& e) {
        // Agreed on (above), so every rank is here alike: the rules decide.
        if (t.has_failed()) throw;
        not_tuned = std::string("tuning failed: ") + e.what();
        warn(t, not_tuned + "; the planner's rules decide");
      }
    }
    if (r.selection.source == PlanSelection::Source::kTuned && t.rank == 0) {
      // Rank 0's alone, after the agreed steps: whatever befalls it here is a warning, never an
      // error its peers would not share.
      std::vector<std::string> warnings;
      try {
        cache.store(key, r.choice, r.selection.detail, warnings);
      } catch (const std::exception& e) {
        warnings.push_back(strfmt("tuning cache %s: %s; the choice is not kept", cache.path().c_str(), e.what()));
      }
      for (const std::string& w : warnings) warn(t, w);
    }
    if (r.selection.source != PlanSelection::Source::kCached && r.selection.source != PlanSelection::Source::kTuned) {
      r.choice = any_m ? plan::choose_any_m(p, topo, o) : plan::choose(p, topo, o);
      r.selection = {PlanSelection::Source::kFallback, "the rules of plan/choose.cpp: " + not_tuned, 0};
    }
  }
  // Where no implementation with a fixed order serves (a range of M the plan's own choice does not
  // take, say), the same refusal on every rank: they all chose alike.
  if (o.deterministic) throw_if_error(plan::deterministic_supported(p, r.choice.impl, t.world));
  // NOTE [collective construction]: every implementation agrees on its local work before its
  // collective steps, so a failure inside make_impl is either every rank's or caught here by
  // the one rank it happened on; either way all ranks meet in this last agree, which also
  // means every rank's workspace is ready before any call can touch it.
  t.agree_local("building the plan", [&] { r.impl = make_impl({team, p, r.choice, measures_core(o)}); });
  return r;
}

}  // namespace

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

}  // namespace detail

Plan::Plan(const Team& team, const GemmProblem& problem, const PlanOptions& options) {
  const auto& t = team.state();
  const uint64_t id = ++t->plans_made;  // first: the same number on every rank, whatever fails
  const DeviceScope device(t->device);  // the plan's GPU while it is made; the caller's current one after
  PlanOptions asked = options;
  asked.tune = detail::resolve_tune(options.tune);
  // A failed team is this rank's verdict too: its peers learn it here instead of waiting.
  Status local = t->failure();
  if (local.ok()) local = detail::check_locally(*t, problem, options);
  // Ranks compare what they were asked for, and the settings that change a protocol between
  // them; the choice below is a function of it.
  const std::string protocol = detail::protocol_settings();
  const std::string descriptor =
      describe(problem) +
      strfmt(" impl=%s chunks=%d comm_sms=%d matmul=%d gathered_a=%d tune=%d deterministic=%d",
             std::string(to_string(options.impl)).c_str(), options.chunks_per_rank, options.comm_sms,
             static_cast<int>(options.matmul),
             options.return_gathered_a ? 1 : 0, static_cast<int>(asked.tune), options.deterministic ? 1 : 0) +
      protocol;
  t->agree(local, descriptor, "the plan");
  auto state = std::make_unique<detail::PlanState>();
  state->team = t;
  state->id = id;
  state->problem = problem;
  state->asked = asked;
  state->return_gathered_a = options.return_gathered_a;
  state->call_graphs = detail::call_graphs_enabled();
  state->protocol = protocol;
  t->agree_local("making the plan", [&] { state->main = detail::make_route(t, problem, asked, /*any_m=*/false); });
  state_ = std::move(state);
}

Plan::~Plan() = default;
Plan::Plan(Plan&&) noexcept = default;
Plan& Plan::operator=(Plan&&) noexcept = default;

namespace detail {
namespace {

// The route of a call of `m` rows: the plan's own, or its range's (null if not made yet).
Route* route_for(PlanState& s, int64_t m) {
  if (m == s.problem.m) return &s.main;
  const auto it = s.ranges.find(plan::range_top(s.problem, s.team->world, m));
  return it == s.ranges.end() ? nullptr : &it->second;
}

// Makes the range of `m` (collective, after the ranks agreed on `mine`).
Route& make_range(PlanState& s, int64_t m, const Status& mine) {
  TeamState& t = *s.team;
  const DeviceScope device(t.device);  // it allocates on the plan's GPU, whatever the caller's current one
  const int64_t top = plan::range_top(s.problem, t.world, m);
  Status verdict = mine;
  if (verdict.ok() && s.asked.impl != Impl::kAuto && !plan::takes_any_m(s.problem, s.asked.impl, s.asked.matmul))
    verdict = {ErrorCode::kUnsupported,
               strfmt("Operands::m=%lld with impl=%s%s: it runs only the plan's M=%lld; use impl=auto, or a plan per M",
                      (long long)m, std::string(to_string(s.asked.impl)).c_str(),
                      s.asked.matmul == Matmul::kSm90 ? " matmul=sm90"
                      : is_fp8(s.problem.dtype)        ? " on FP8 operands"
                                                       : "",
                      (long long)s.problem.m)};
  // A range's implementations read the protocol settings anew: the plan's agreement holds only
  // while they are those it was made with.
  if (const std::string now = protocol_settings(); verdict.ok() && now != s.protocol)
    verdict = {ErrorCode::kInvalidArgument,
               strfmt("Operands::m=%lld needs a new range of the plan, but the environment's protocol settings "
                      "changed since the plan was made (from '%s' to '%s'): keep them as they were, on every rank",
                      (long long)m, s.protocol.c_str(), now.c_str())};
  GemmProblem q = s.problem;
  q.m = top;
  // The ranks agree on the verdict and the range first. Through the host rendezvous where they
  // are all on this host: a peer in another call (the same plan with another M, say) fails every
  // rank at once, naming both calls; across hosts, through the team's (bounded) agreement.
  const std::string what = strfmt("making the range of M up to %lld", (long long)top);
  t.agree_step(verdict, what, s.id, "a range of the plan");
  Route r;
  t.agree_local("making a range of the plan", [&] { r = make_route(s.team, q, s.asked, /*any_m=*/true); });
  return s.ranges.emplace(top, std::move(r)).first->second;
}

}  // namespace
}  // namespace detail

void Plan::prepare(int64_t m) {
  detail::live(state_, "prepare()");
  detail::PlanState& s = *state_;
  const Status m_ok = plan::check_call_m(s.problem, s.team->world, m);
  if (m_ok.ok() && detail::route_for(s, m) != nullptr) {  // (every rank: the same ranges)
    if (const Status failed = s.team->failure(); !failed.ok()) throw Error(failed);
    return;
  }
  // A bad M, or a failed team, still joins the making its peers are about to do, so that they
  // hear of it there instead of waiting for it.
  detail::make_range(s, m, m_ok.ok() ? s.team->failure() : m_ok);
}

void Plan::run(const Operands& operands, cudaStream_t stream) {
  detail::live(state_, "run()");
  detail::PlanState& s = *state_;
  detail::TeamState& t = *s.team;
  const DeviceScope device(t.device);  // (the GEMM core's launches read the current device)
  Operands o = operands;
  if (o.m == 0) o.m = s.problem.m;
  if (!s.return_gathered_a) o.a_gathered = nullptr;  // a plan made without it writes none
  GemmProblem call = s.problem;
  call.m = o.m;
  Status mine = t.failure();  // a failed team stops every rank, not only this one
  const Status m_ok = plan::check_call_m(s.problem, t.world, o.m);
  if (mine.ok()) mine = m_ok;
  bool capturing = false;  // (a bad stream is this rank's verdict, which its peers hear of in make_range)
  if (const Status q = t.check_stream(stream, &capturing); mine.ok()) mine = q;
  if (mine.ok()) mine = plan::validate_operands(call, t.world, o, s.return_gathered_a);
  const std::array<const void*, 7> ptrs = {o.a, o.b, s.problem.has_c ? o.c : nullptr, o.d,
                                           s.return_gathered_a ? o.a_gathered : nullptr, o.a_scale, o.b_scale};
  constexpr const char* kNames[] = {"A", "B", "C", "D", "A_gathered", "a_scale", "b_scale"};
  for (size_t i = 0; i < ptrs.size() && mine.ok(); ++i) mine = t.check_device_memory(kNames[i], ptrs[i], s.device_memory[i]);
  // A rank whose call is bad but whose M is valid still takes part in making M's range, where its
  // peers (with the same M) are about to: it tells them there, instead of leaving them waiting.
  detail::Route* route = m_ok.ok() ? detail::route_for(s, o.m) : &s.main;
  if (route == nullptr) {
    if (capturing) {
      const Status refused{
          ErrorCode::kInvalidArgument,
          strfmt("Plan::run with Operands::m=%lld under CUDA-graph capture: the implementation for its range (M up "
                 "to %lld) is not made yet, and making it allocates; call Plan::prepare(%lld) before capturing",
                 (long long)o.m, (long long)plan::range_top(s.problem, t.world, o.m), (long long)o.m)};
      // Checked collectively, the peers hear of it (one with another M fails there too, naming
      // both calls) rather than wait for this rank; checked locally, the ranks made the same
      // ranges, so with the same M every one refuses alike.
      if (t.collective_calls && t.rendezvous != nullptr)
        t.agree_call(refused, strfmt("Plan::run with M=%lld", (long long)o.m).c_str(), s.id);
      throw Error(refused);
    }
    route = &detail::make_range(s, o.m, mine);  // collective, like the plan; agrees on `mine` first
  }
  // Checked collectively, a call runs directly, its prologue before the rendezvous; checked
  // locally (the default), where its verdict is its own, it may replay (NOTE [call graphs]).
  const bool graphed = s.call_graphs && !t.collective_calls && route->choice.impl != Impl::kBaseline;
  if (mine.ok() && !graphed) {
    // Local work into the plan's own buffers, begun before the rendezvous; a failure there
    // (a bad stream, say) is this rank's verdict, which its peers must hear, not wait for.
    try {
      route->impl->prologue(o, stream);
    } catch (const Error& e) {
      mine = e.status();
    } catch (const std::exception& e) {  // (memory for a new call's matmul, say)
      mine = {ErrorCode::kInternal, strfmt("rank %d, Plan::run's local work: %s", t.rank, e.what())};
    }
  }
  if (t.collective_calls) {  // the ranks compare the plan and the call's M (a different M fails on every rank)
    const std::string what = strfmt("Plan::run with M=%lld", (long long)o.m);
    t.agree_call(mine, what.c_str(), s.id);
  } else {
    t.agree_call(mine, "Plan::run", s.id);
  }
  if (!graphed) return route->impl->run(o, stream);
  detail::OpImpl& impl = *route->impl;
  route->graphs.run({ptrs, o.m}, stream, [&](cudaStream_t st) {
    impl.prologue(o, st);
    impl.run(o, st);
  });
}

Impl Plan::impl() const { return detail::live(state_, "impl()").main.choice.impl; }
namespace {

// The route of calls of `m` rows, for the accessors: null where its range is not made; an `m` no
// call could have (out of range, not a multiple of W where the op shards M) is an InvalidArgument.
const detail::Route* made_route(const std::unique_ptr<detail::PlanState>& state, int64_t m, const char* what) {
  detail::live(state, what);
  detail::PlanState& s = *state;
  throw_if_error(plan::check_call_m(s.problem, s.team->world, m));
  return detail::route_for(s, m);
}

// The options a plan made with `asked` runs with `c`.
PlanOptions resolved(PlanOptions asked, const plan::Choice& c) {
  asked.impl = c.impl;
  asked.chunks_per_rank = c.chunks;
  asked.comm_sms = c.comm_sms;
  asked.matmul = c.matmul;
  return asked;
}

}  // namespace

Impl Plan::impl(int64_t m) const {
  const detail::Route* r = made_route(state_, m, "impl()");
  return r ? r->choice.impl : Impl::kAuto;
}
const GemmProblem& Plan::problem() const { return detail::live(state_, "problem()").problem; }
PlanOptions Plan::options() const {
  detail::live(state_, "options()");
  return resolved(state_->asked, state_->main.choice);
}
PlanOptions Plan::options(int64_t m) const {
  const detail::Route* r = made_route(state_, m, "options()");
  if (r == nullptr) {
    PlanOptions o = state_->asked;
    o.impl = Impl::kAuto;
    return o;
  }
  return resolved(state_->asked, r->choice);
}
const PlanSelection& Plan::selection() const { return detail::live(state_, "selection()").main.selection; }
const PlanSelection* Plan::selection(int64_t m) const {
  const detail::Route* r = made_route(state_, m, "selection()");
  return r ? &r->selection : nullptr;
}

Status Plan::can_implement(const Team& team, const GemmProblem& problem, const PlanOptions& options) {
  try {  // (non-throwing: a moved-from Team is a Status too)
    return detail::check_locally(*team.state(), problem, options);
  } catch (const Error& e) {
    return e.status();
  }
}

}  // namespace tpgemm
