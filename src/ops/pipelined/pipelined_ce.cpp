// The copy-engine pipelined implementation of all three ops: it enqueues the steps of the
// schedule src/plan builds (NOTE [schedule model]) on the caller's stream and one or two
// high-priority side streams. Matmuls are cuBLASLt's or, with Choice::matmul kSm90, the Hopper
// GEMM core's (whose TMA epilogue loads C from a producer warp of its own, beside the mainloop);
// transfers are cudaMemcpyAsync between symmetric buffers over NVLink (no SMs), arrival flags are
// copy-engine writes behind their copies; the SM work besides the matmuls is small: one-block
// barrier and flag-wait kernels, a one-thread kernel per ready flag, the reduction, and the add-C
// pass.
#include <algorithm>
#include <array>
#include <map>

#include "comm/signal_pad.h"
#include "comm/symmetric.h"
#include "comm/timeout.h"
#include "core/check.h"
#include "core/cuda_raii.h"
#include "core/env.h"
#include "core/format.h"
#include "gemm/lt_matmul.h"
#include "gemm/sm90_gemm.h"
#include "ops/common/copy_batched.h"
#include "ops/common/elementwise.h"
#include "ops/op_impl.h"
#include "ops/pipelined/pipelined_scales.h"
#include "ops/pipelined/slot_reduce.h"
#include "plan/problem.h"
#include "plan/schedule.h"

namespace tpgemm::detail {
namespace {

using plan::Buf;
using plan::Region;
using plan::Step;
using plan::StepKind;

// NOTE [pipelined calls of fewer rows]
// A plan's range of M (Plan::run) may run pipelined_ce (plan::takes_any_m): its calls have any M
// up to the one it was made for. Each M's schedule (plan::build_pipelined of the call's problem)
// is built on its first call, host work alone (the steps, cuBLASLt's plans of its matmuls: no
// allocation, no synchronisation, so under graph capture too), and runs in the buffers made for
// the largest M, which hold every smaller M's rows at that M's own geometry. Its flags' rounds and
// its barriers follow the chunks alone, so calls of different M follow one another on one signal
// pad; empty pieces (fewer rows than chunks) still raise and wait for their flags.
struct Shape {
  GemmProblem p;  // the call's problem: the plan's, with the call's M
  GemmProblem q;  // the problem the schedule runs: p, or along N its transpose (NOTE [shard along N])
  plan::Schedule schedule;
};

class PipelinedCE final : public OpImpl {
 public:
  explicit PipelinedCE(const ImplContext& ctx)
      : team_(ctx.team),
        p_(ctx.problem),
        choice_(ctx.choice),
        measure_core_(ctx.measure_core),
        a_es_(static_cast<int64_t>(dtype_size(p_.dtype))),
        d_es_(static_cast<int64_t>(dtype_size(d_dtype(p_)))),
        matmuls_(ctx.team->lt) {
    TeamState& t = *team_;
    TPGEMM_ASSERT(t.world <= plan::kMaxSymmetricWorld);  // impl_supported's limit
    // NOTE [collective construction]: everything local first (the schedule, cuBLASLt plans,
    // local buffers, streams), agreed on by all ranks; then the symmetric buffers, which are
    // collective and fail on every rank alike.
    std::array<bool, plan::kNumBufs> used{};
    t.agree_local("building the pipelined schedule and its local workspace", [&] {
      // NOTE [direct stores]: asked for by the environment (every rank alike: protocol_settings).
      direct_ = plan::direct_stores_fit(p_, t.world) && env_int("TPGEMM_PIPELINED_DIRECT", 0, 1).value_or(0) == 1;
      partial_as_c_ = !direct_ && plan::partial_as_c_fits(p_, t.world) && choice_.chunks >= 2;  // NOTE [partial as C]
      made_ = build_shape(p_);
      cur_ = &made_;
      const plan::Schedule& schedule = made_.schedule;
      used = buffers_used(schedule, t.world);
      for (int b = static_cast<int>(plan::kFirstOwnBuf); b < plan::kNumBufs; ++b)
        if (used[b] && !(plan::is_symmetric(static_cast<Buf>(b)) && t.world > 1))
          local_[b] = DeviceBuffer(bytes_of(static_cast<Buf>(b)));
      copy_stream_ = Stream::highest_priority();
      gather_stream_ = Stream::highest_priority();  // (some schedules have no step on it)
      for (int e = 0; e < schedule.num_events; ++e) events_.push_back(Event::create());
      // The scales first: they refuse block scales on rows cuBLASLt's matmul would not take.
      scales_ = PipelinedScales(p_, t.world, t.rank, schedule);
      size_t workspace = gemm::LtMatmul::kWorkspaceBytes;  // cuBLASLt's; the core's stream-K may need more
      for (const Step& s : schedule.steps)
        if (s.kind == StepKind::kGemm) {  // plan every matmul now, not in run()
          if (choice_.matmul == Matmul::kSm90)
            workspace = std::max(workspace, core_for(s).workspace_bytes());
          else
            matmul_for(s);
        }
      workspace_ = DeviceBuffer(workspace);  // one, shared by the matmuls (one stream runs them)
    });
    // Symmetric buffers, in the same order on every rank.
    for (int b = static_cast<int>(plan::kFirstOwnBuf); b < plan::kNumBufs; ++b)
      if (used[b] && plan::is_symmetric(static_cast<Buf>(b)) && t.world > 1)
        symmetric_[b] =
            comm::SymmetricBuffer(team_, bytes_of(static_cast<Buf>(b)), std::string(plan::to_string(static_cast<Buf>(b))).c_str());
    scales_.make_table(team_);
    if (t.world > 1) pad_ = comm::SignalPad(team_, made_.schedule.num_barriers, plan::kNumFlags, made_.schedule.rounds, "pipelined flags");
    drop_signals_ = comm::test_drops_signals(t.rank);
  }

  // A call of a new M: its schedule and matmuls made before the ranks agree on the call.
  void prologue(const Operands& o, cudaStream_t stream) override {
    (void)stream;
    shape_of(o.m);
  }

  void run(const Operands& o, cudaStream_t stream) override {
    ops_ = o;
    cur_ = &shape_of(o.m);
    scales_.begin_call(o.a_scale, stream);
    for (const Step& s : cur_->schedule.steps) {
      const cudaStream_t st = s.stream == plan::Stream::kCompute ? stream
                              : s.stream == plan::Stream::kCopy  ? copy_stream_.get()
                                                                 : gather_stream_.get();
      if (drop_signals_ && (s.kind == StepKind::kBarrier || s.kind == StepKind::kSignal)) continue;
      switch (s.kind) {
        case StepKind::kGemm: {
          if (P().shard_dim == ShardDim::kN) {
            column_gemm(s, st);
            break;
          }
          const Ptr a = address(s.src), d = address(s.dst);
          // C: the peer's partial, weight 1 (NOTE [partial as C]), or the caller's C beside the
          // rows of D this matmul writes.
          const char* cptr = nullptr;
          float beta = P().beta;
          if (s.has_addend) {
            cptr = address(s.addend).ptr;
            beta = 1.0f;
          } else if (s.add_c && P().has_c) {
            TPGEMM_ASSERT(s.dst.buf == Buf::kUserD);
            Region c = s.dst;
            c.buf = Buf::kUserC;
            cptr = address(c).ptr;
          }
          if (choice_.matmul == Matmul::kSm90)
            core_for(s).run(a.ptr, o.b, cptr, d.ptr, P().alpha, beta, workspace_.get(), st);
          else
            matmul_for(s).run(a.ptr, o.b, cptr, d.ptr, P().alpha, beta, workspace_.get(), st, scales_.of(s.src), o.b_scale);
          break;
        }
        case StepKind::kCopy: copy(s, st); break;
        case StepKind::kBarrier: pad_.barrier(s.index, st); break;
        case StepKind::kSignal:
          // (plan::Flag: ready flags from the SMs, arrival flags behind their copies, or behind a
          // matmul's own stores into the peer: NOTE [direct stores].)
          if (s.flag == plan::Flag::kReady || s.from_sms)
            pad_.raise(static_cast<int>(s.flag), s.peer, s.round, st);
          else
            pad_.signal(static_cast<int>(s.flag), s.peer, s.round, st);
          break;
        case StepKind::kWaitSignal:
          pad_.wait(static_cast<int>(s.flag), s.peer, s.round,
                    s.flag == plan::Flag::kReady ? comm::WaitSite::kReadyFlag
                    : P().op == Op::kAgGemm      ? comm::WaitSite::kRowsPushed
                                                 : comm::WaitSite::kArriveFlag,
                    st);
          break;
        case StepKind::kReduce: reduce(s, st); break;
        case StepKind::kAddC:  // (gemm_ar only: always along M)
          TPGEMM_ASSERT(P().shard_dim == ShardDim::kM);
          if (P().beta != 0.0f) add_c(s.dst, st);
          break;
        case StepKind::kRecord: TPGEMM_CUDA_CHECK(cudaEventRecord(events_[s.index].get(), st)); break;
        case StepKind::kWaitEvent: TPGEMM_CUDA_CHECK(cudaStreamWaitEvent(st, events_[s.index].get(), 0)); break;
      }
    }
    if (o.a_gathered != nullptr) copy_gathered_a(o, stream);
  }

 private:
  struct Ptr {
    char* ptr;
    int64_t batch_stride;  // elements
    int64_t ld;            // elements between rows
  };

  // Elements between the rows of buffer b: the caller's strides (GemmProblem::lda, ldc, ldd;
  // A's row of [K, M] where a_layout=km); tpgemm's buffers are packed (ag_gemm's gathered A as
  // [K, M] where A is stored so). Along N the caller's operands are packed (impl_supported).
  int64_t ld_of(Buf b) const {
    const int w = team_->world;
    if (P().shard_dim == ShardDim::kM) {
      if (b == Buf::kUserA) return plan::a_ld(P(), w);
      if (b == Buf::kGathered && a_km(b)) return P().m;
      if (b == Buf::kUserC) return plan::c_ld(P(), w);
      if (b == Buf::kUserD) return plan::d_ld(P(), w);
    }
    return plan::buffer_geometry(b, Q(), w).cols;
  }
  // Likewise between its batch entries (GemmProblem::batch_stride_a, batch_stride_c, batch_stride_d).
  int64_t batch_of(Buf b) const {
    const int w = team_->world;
    if (P().shard_dim == ShardDim::kM) {
      if (b == Buf::kUserA) return plan::a_batch_stride(P(), w);
      if (b == Buf::kUserC) return plan::c_batch_stride(P(), w);
      if (b == Buf::kUserD) return plan::d_batch_stride(P(), w);
    }
    const plan::BufGeometry g = plan::buffer_geometry(b, Q(), w);
    return g.rows * g.cols;
  }
  // A stored [K, M] (a_layout=km, along M): a block of A's rows is a block of
  // columns there, which the matmul reads transposed. ag_gemm gathers it as it is stored: its
  // gathered buffer is [K, M], each rank's block K rows of its columns (a 2D copy per piece).
  bool a_km(Buf b) const {
    return P().a_layout == ALayout::kKM && (b == Buf::kUserA || (b == Buf::kGathered && P().op == Op::kAgGemm));
  }

  // Bytes per element of buffer b: the operand's type where it holds rows of A (along N, of B),
  // D's (the output type) where it holds products.
  int64_t es(Buf b) const {
    switch (b) {
      case Buf::kUserA:
      case Buf::kGathered: return a_es_;
      case Buf::kUserC:
      case Buf::kUserD:
      case Buf::kStage:
      case Buf::kRecv:
      case Buf::kReduced: return d_es_;
    }
    TPGEMM_ASSERT(false);  // every buffer is named above
    return 0;
  }

  // Bytes of buffer b for the calls of `shape`; the buffers are made for made_'s.
  size_t bytes_of(Buf b, const Shape& shape) const {
    const plan::BufGeometry g = plan::buffer_geometry(b, shape.q, team_->world);
    return static_cast<size_t>(g.slots * shape.p.l * g.rows * g.cols * es(b));
  }
  size_t bytes_of(Buf b) const { return bytes_of(b, made_); }

  Shape build_shape(const GemmProblem& p) const {
    Shape x;
    x.p = p;
    x.q = p.shard_dim == ShardDim::kN ? plan::transposed(p) : p;
    x.schedule = plan::build_pipelined(x.q, team_->world, team_->rank, choice_.chunks, partial_as_c_, direct_);
    throw_if_error(plan::check_schedule(x.schedule, x.q));
    return x;
  }

  // NOTE [pipelined calls of fewer rows]: the shape of a call of `m` rows, built on its first call.
  const Shape& shape_of(int64_t m) {
    if (m <= 0 || m == p_.m) return made_;  // (Operands::m 0: the plan's M)
    if (const auto it = fewer_.find(m); it != fewer_.end()) return it->second;
    // Made for p_.m alone: FP8 scales are laid out per chunk, the Hopper core's configuration
    // measured per matmul shape (plan::takes_any_m refuses them; Plan::run routes them nowhere else).
    TPGEMM_ASSERT(m < p_.m && plan::takes_any_m(p_, Impl::kPipelinedCE, choice_.matmul));
    Shape x = build_shape(detail::call_problem(p_, Operands{.m = m}));
    // Same protocol as the plan's M (its rounds of flags and its barriers follow the chunks
    // alone), in its buffers: fewer rows fit.
    TPGEMM_ASSERT(x.schedule.rounds == made_.schedule.rounds && x.schedule.num_barriers == made_.schedule.num_barriers &&
                  x.schedule.num_events <= static_cast<int>(events_.size()));
    const std::array<bool, plan::kNumBufs> used = buffers_used(x.schedule, team_->world);
    for (int b = static_cast<int>(plan::kFirstOwnBuf); b < plan::kNumBufs; ++b) {
      const size_t have = symmetric_[b] ? symmetric_[b].bytes() : local_[b].bytes();
      TPGEMM_ASSERT(!used[b] || bytes_of(static_cast<Buf>(b), x) <= have);
    }
    if (fewer_.size() >= kMaxShapes) fewer_.clear();  // (a serving loop's many Ms: made again as they come)
    const auto it = fewer_.emplace(m, std::move(x)).first;
    // Every matmul planned before the call enqueues anything: a shape cuBLASLt refuses fails here,
    // in the prologue, where the ranks still agree on the call (Plan::run). (matmul_for reads
    // cur_, which run() sets anew for every call.)
    cur_ = &it->second;
    try {
      for (const Step& s : it->second.schedule.steps)
        if (s.kind == StepKind::kGemm) matmul_for(s);
    } catch (...) {
      cur_ = &made_;
      fewer_.erase(it);
      throw;
    }
    return it->second;
  }

  // The buffers a schedule's steps read or write (on `world` ranks: one rank reduces into D alone).
  static std::array<bool, plan::kNumBufs> buffers_used(const plan::Schedule& schedule, int world) {
    std::array<bool, plan::kNumBufs> used{};
    for (const Step& s : schedule.steps) {
      if (s.kind == StepKind::kGemm || s.kind == StepKind::kCopy)
        used[static_cast<int>(s.src.buf)] = used[static_cast<int>(s.dst.buf)] = true;
      if (s.kind == StepKind::kGemm && s.has_addend) used[static_cast<int>(s.addend.buf)] = true;
      if (s.kind == StepKind::kReduce) {
        used[static_cast<int>(Buf::kRecv)] = true;
        if (s.to_reduced && world > 1) used[static_cast<int>(Buf::kReduced)] = true;
      }
    }
    return used;
  }

  const GemmProblem& P() const { return cur_->p; }  // the call's problem: p_ with the call's M
  const GemmProblem& Q() const { return cur_->q; }  // the problem its schedule runs

  // PlanOptions::return_gathered_a (ag_gemm along M): this rank's rows from its A, the peers'
  // from the gathered buffer, which every matmul on the caller's stream has waited for.
  void copy_gathered_a(const Operands& o, cudaStream_t stream) const {
    const int64_t mw = P().m / team_->world, row = P().k * a_es_, own = team_->rank * mw;
    ops::copy_matrices(static_cast<char*>(o.a_gathered) + own * row, row, P().m * row, o.a, ld_of(Buf::kUserA) * a_es_,
                       batch_of(Buf::kUserA) * a_es_, row, mw, P().l, stream);
    if (team_->world == 1) return;
    const char* g = static_cast<const char*>(symmetric_[static_cast<int>(Buf::kGathered)].local());
    TPGEMM_ASSERT(g != nullptr);
    ops::copy_rows(o.a_gathered, P().m, 0, g, P().m, 0, own, row, P().l, stream);
    ops::copy_rows(o.a_gathered, P().m, own + mw, g, P().m, own + mw, P().m - own - mw, row, P().l, stream);
  }

  // NOTE [pipelined buffers] row spaces, turned into addresses.
  Ptr address(const Region& r) const {
    const plan::BufGeometry g = plan::buffer_geometry(r.buf, Q(), team_->world);
    char* base = nullptr;
    const int b = static_cast<int>(r.buf);
    switch (r.buf) {
      // Along N the schedule's A is the caller's B (NOTE [shard along N]).
      case Buf::kUserA: base = static_cast<char*>(const_cast<void*>(P().shard_dim == ShardDim::kN ? ops_.b : ops_.a)); break;
      case Buf::kUserC: base = static_cast<char*>(const_cast<void*>(ops_.c)); break;
      case Buf::kUserD: base = static_cast<char*>(ops_.d); break;
      default:
        if (symmetric_[b]) base = static_cast<char*>(r.rank == team_->rank ? symmetric_[b].local() : symmetric_[b].peer(r.rank));
        else base = local_[b].as<char>();
    }
    TPGEMM_ASSERT(base != nullptr && (r.rank == team_->rank || symmetric_[b]));
    const int64_t ld = ld_of(r.buf);
    const int64_t elems = static_cast<int64_t>(r.slot) * P().l * g.rows * g.cols + (a_km(r.buf) ? r.row0 : r.row0 * ld);
    return {base + elems * es(r.buf), batch_of(r.buf), ld};
  }

  // NOTE [shard along N]: a matmul step of the transposed schedule, rows [r0, r0 + n) of D^T,
  // runs as D[:, r0 : r0 + n] = A x (those columns of B).
  struct ColumnOperands {
    const char* b;
    char* d;
    const char* c;
  };
  ColumnOperands column_operands(const Step& s) const {
    ColumnOperands x{};
    // B: the region's rows of the schedule's A, which is B as [N, K] (NOTE [pipelined buffers]
    // addresses it), except for gemm_rs's B as [K, N], read in place: there its columns.
    if (P().op == Op::kGemmRs && P().b_layout == BLayout::kKN)
      x.b = static_cast<const char*>(ops_.b) + s.src.row0 * a_es_;
    else
      x.b = address(s.src).ptr;
    // D: the caller's D takes the columns in place; tpgemm's buffers hold the [M, n] block whole.
    if (s.dst.buf == Buf::kUserD) {
      x.d = static_cast<char*>(ops_.d) + s.dst.row0 * d_es_;
      if (s.add_c && P().has_c) x.c = static_cast<const char*>(ops_.c) + s.dst.row0 * d_es_;
    } else {
      x.d = address(s.dst).ptr;
    }
    return x;
  }

  void column_gemm(const Step& s, cudaStream_t st) {
    const ColumnOperands x = column_operands(s);
    column_matmul_for(s).run(ops_.a, x.b, x.c, x.d, P().alpha, P().beta, workspace_.get(), st, ops_.a_scale, ops_.b_scale);
  }

  const gemm::LtMatmul& column_matmul_for(const Step& s) {
    const int64_t cols = s.src.rows;
    const bool user_d = s.dst.buf == Buf::kUserD, c = s.add_c && P().has_c;
    const int sms = s.carveout && choice_.comm_sms > 0 ? team_->num_sms - choice_.comm_sms : 0;
    // Batch strides follow the buffers' geometry, so a plan is kept per pair of geometries.
    const int64_t src_rows = plan::buffer_geometry(s.src.buf, Q(), team_->world).rows;
    const int64_t dst_rows = user_d ? -1 : plan::buffer_geometry(s.dst.buf, Q(), team_->world).rows;
    gemm::MatmulShape shape = gemm::packed_shape(P(), P().m, cols);
    const bool kn = P().b_layout == BLayout::kKN;
    if (P().op == Op::kGemmRs) {  // the caller's [K, N] or [N, K]
      shape.ldb = kn ? P().n : P().k;
      shape.stride_b = P().k * P().n;
    } else {  // a packed block: [K, cols] or [cols, K], batch entries as the buffer lays them out
      shape.stride_b = src_rows * P().k;
    }
    if (user_d) {
      shape.ldc = shape.ldd = P().n;
      shape.stride_c = shape.stride_d = P().m * P().n;
    } else {
      shape.stride_d = dst_rows * P().m;
    }
    shape.has_c = c;
    shape.sm_count = sms;
    return matmuls_.get(shape);
  }

  // The Hopper GEMM core's matmul of a kGemm step (Choice::matmul kSm90): one kernel plan per
  // distinct shape, made with the plan. Unsupported names the step's shape where the core cannot
  // run it.
  const gemm::Sm90Gemm& core_for(const Step& s) {
    TPGEMM_ASSERT(P().shard_dim == ShardDim::kM);  // plan::pipelined_core_possible
    const gemm::MatmulShape shape = row_shape(s);
    for (const auto& c : cores_)
      if (c->shape() == shape) return *c;
    if (Status st = gemm::Sm90Gemm::device_supported(team_->device); !st.ok()) throw Error(st.code, st.message);
    if (std::string why; !gemm::Sm90Gemm::supports(shape, &why))
      throw Error(ErrorCode::kUnsupported,
                  strfmt("matmul=sm90: the Hopper GEMM core cannot run the matmul of %lld x %lld x %lld: %s; use "
                         "matmul=cublaslt",
                         (long long)shape.m, (long long)shape.n, (long long)shape.k, why.c_str()));
    cores_.push_back(std::make_unique<gemm::Sm90Gemm>(shape, std::string_view(), measure_core_));
    // Made with the plan only, which sizes workspace_ for every core (run() finds them all made).
    TPGEMM_ASSERT(workspace_.bytes() == 0 || cores_.back()->workspace_bytes() <= workspace_.bytes());
    return *cores_.back();
  }

  const gemm::LtMatmul& matmul_for(const Step& s) {
    return P().shard_dim == ShardDim::kN ? column_matmul_for(s) : matmuls_.get(row_shape(s));
  }

  // The matmul of a kGemm step along M, whichever library runs it.
  gemm::MatmulShape row_shape(const Step& s) const {
    const plan::BufGeometry ga = plan::buffer_geometry(s.src.buf, P(), team_->world);
    const plan::BufGeometry gd = plan::buffer_geometry(s.dst.buf, P(), team_->world);
    const bool c = (s.add_c && P().has_c) || s.has_addend;
    const int sms = s.carveout && choice_.comm_sms > 0 ? team_->num_sms - choice_.comm_sms : 0;
    gemm::MatmulShape shape = gemm::packed_shape(P(), s.src.rows, P().n);
    shape.a_transposed = a_km(s.src.buf);
    // (a block of columns of a [K, M] A starts 16-byte aligned only where its first row does)
    shape.a_unaligned = shape.a_transposed && (s.src.row0 * a_es_) % 16 != 0;
    shape.lda = ld_of(s.src.buf);
    shape.ldb = plan::b_ld(P(), team_->world);
    shape.stride_b = plan::b_batch_stride(P(), team_->world);  // the caller's B, read in place
    shape.ldd = ld_of(s.dst.buf);
    if (c) shape.ldc = ld_of(s.has_addend ? s.addend.buf : Buf::kUserC);
    shape.stride_a = s.src.buf == Buf::kUserA ? batch_of(Buf::kUserA) : ga.rows * P().k;
    shape.stride_d = s.dst.buf == Buf::kUserD ? batch_of(Buf::kUserD) : gd.rows * P().n;
    // C: the caller's (beside the caller's D), or the receive buffer's partial for an addend
    // (NOTE [partial as C]).
    shape.stride_c = s.has_addend ? plan::buffer_geometry(s.addend.buf, P(), team_->world).rows * P().n
                                  : batch_of(Buf::kUserC);
    shape.has_c = c;
    shape.sm_count = sms;
    return shape;
  }

  void copy(const Step& s, cudaStream_t st) {
    scales_.push(s, st);  // NOTE [gathered scales]
    const Ptr src = address(s.src), dst = address(s.dst);
    const int64_t cols = plan::buffer_geometry(s.src.buf, Q(), team_->world).cols, e = es(s.src.buf);
    const bool km = a_km(s.src.buf);
    TPGEMM_ASSERT(e == es(s.dst.buf) && km == a_km(s.dst.buf));  // rows move between buffers of one kind
    // The piece's rows of each entry; of a [K, M] A, a block of its columns: K rows of the piece's rows.
    ops::copy_matrices(dst.ptr, dst.ld * e, dst.batch_stride * e, src.ptr, src.ld * e, src.batch_stride * e,
                       (km ? s.src.rows : cols) * e, km ? P().k : s.src.rows, P().l, st);
  }

  // gemm_ar: beta * C onto the rows of D pulled from their owners.
  void add_c(const Region& d, cudaStream_t st) {
    Region c = d;
    c.buf = Buf::kUserC;
    const Ptr dp = address(d), cp = address(c);
    ops::add_scaled_strided(dp.ptr, dp.ld, dp.batch_stride, cp.ptr, cp.ld, cp.batch_stride, P().beta, P().l, d.rows, P().n,
                            d_dtype(P()), team_->num_sms, st);
  }

  void reduce(const Step& s, cudaStream_t st) const {
    const TeamState& t = *team_;
    const plan::BufGeometry gr = plan::buffer_geometry(Buf::kRecv, Q(), t.world);
    ops::SlotReduceArgs a;
    const int recv = static_cast<int>(Buf::kRecv), red = static_cast<int>(Buf::kReduced);
    a.recv = t.world > 1 ? symmetric_[recv].local() : local_[recv].get();
    a.slot_elems = P().l * gr.rows * gr.cols;
    a.recv_batch_elems = gr.rows * gr.cols;
    a.row0 = s.src.row0;
    a.rows = s.src.rows;
    a.n = Q().n;
    a.l = P().l;
    a.d = ops_.d;
    a.d_batch_elems = batch_of(Buf::kUserD);
    a.c_batch_elems = batch_of(Buf::kUserC);
    a.d_row0 = s.dst.row0;
    a.d_ld = ld_of(Buf::kUserD);
    a.c_ld = ld_of(Buf::kUserC);
    a.c = P().has_c && P().beta != 0.0f ? ops_.c : nullptr;
    a.beta = P().beta;
    a.reduced = s.to_reduced && t.world > 1 ? symmetric_[red].local() : nullptr;
    a.world = t.world;
    a.round = s.round;
    if (t.world > 1) {
      a.arrive = pad_.family_slots(static_cast<int>(plan::Flag::kArrive));
      a.seq = pad_.seq();
    }
    a.env = t.wait_env();
    // An empty block still waits for its arrivals: the flags are part of the protocol.
    if (a.rows > 0 || t.world > 1) ops::launch_slot_reduce(a, d_dtype(P()), t.num_sms, st);
  }

  std::shared_ptr<TeamState> team_;
  GemmProblem p_;  // the plan's: its M is the most rows a call has
  plan::Choice choice_;
  bool direct_ = false, partial_as_c_ = false;  // NOTE [direct stores], NOTE [partial as C]
  Shape made_;  // the calls of p_.m rows
  static constexpr size_t kMaxShapes = 64;
  std::map<int64_t, Shape> fewer_;  // the calls of fewer rows, by their M
  const Shape* cur_ = nullptr;      // the call being enqueued's
  bool measure_core_;  // ImplContext::measure_core
  int64_t a_es_, d_es_;  // bytes per element of A and B, and of C and D
  comm::SymmetricBuffer symmetric_[plan::kNumBufs];
  DeviceBuffer local_[plan::kNumBufs];
  comm::SignalPad pad_;
  Stream copy_stream_, gather_stream_;
  std::vector<Event> events_;
  DeviceBuffer workspace_;
  gemm::LtMatmulCache matmuls_;  // every matmul of the schedule, planned when the plan is made
  std::vector<std::unique_ptr<gemm::Sm90Gemm>> cores_;  // Choice::matmul kSm90: a plan per matmul shape
  Operands ops_{};  // the operands of the call being enqueued
  PipelinedScales scales_;  // NOTE [gathered scales]
  bool drop_signals_ = false;
};

}  // namespace

std::unique_ptr<OpImpl> make_pipelined_ce(const ImplContext& ctx) { return std::make_unique<PipelinedCE>(ctx); }

}  // namespace tpgemm::detail
