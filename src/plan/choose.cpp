#include "plan/choose.h"

#include <algorithm>
#include <array>
#include <vector>

#include "core/format.h"
#include "gemm/sm90_config.h"
#include "plan/schedule.h"  // partial_as_c_fits

namespace tpgemm::plan {

// NOTE [planner rules]
// The fallback of the measured planner (NOTE [measured planner], ops/tuner.h): what `auto` takes
// where tuning is off or fails. The rules were fitted to tpgemm-bench runs on H200s at W = 2 and
// 4; docs/planner.md gives the measurements behind each. A rule sends a shape to an overlapped
// implementation only where it measured faster than the baseline; everything else stays on the
// baseline, so the rules are never knowingly slower than NCCL + cuBLAS.
//   ag_gemm  A few hundred rows per rank block or fewer: allgather_gemm (tpgemm's all-gather is
//            shorter than NCCL's, and the rows are too few to cut into chunks). From 256 rows per
//            block pipelined_ce, two chunks from 2048 rows (the last chunk's matmul is the exposed
//            tail). At W >= 4, fused from 1024 rows per block where pipelined's chunk matmuls
//            would leave their last wave more than 10% empty.
//   gemm_rs  Likewise gemm_reducescatter for small blocks, then pipelined_ce; at W=2 without C from
//            1024 rows per block in two chunks, the peer's partial added in the own chunks'
//            epilogues (NOTE [partial as C]). fused never: it measured slower than pipelined_ce.
//   gemm_ar  fused from 16 MB of D per rank (8 MB at W >= 4) where M is whole 128-row tiles per
//            rank, else pipelined_ce; at W=2 without C from 4096 rows per block the ring of
//            partials as C instead. Below that the matmul then the all-reduce choose_allreduce
//            picks for D's size (one-shot further than alone), fused's decode kernel at W=2 for
//            M = 16-64, and at W > 2 between 4 and 16 MB of D the baseline (nothing won reliably).
// Along N (shard_dim n) the rules of the transposed problem, without fused (NOTE [shard along N]).
// Unmeasured world sizes (W > 4) follow the W = 4 rules. e4m3 operands take the same rules among
// the implementations that take them: at W=2, pipelined_ce's e4m3 ag_gemm measured faster than the
// e4m3 baseline on every shared shape, as did the gemm_rs and gemm_ar picks (docs/perf.md, FP8).
namespace {

constexpr int64_t kMiB = int64_t(1) << 20;

constexpr int kDefaultCommSms = 2;

// gemm_ar at W=2 without C, from 4096 rows per block and N = 8192: the ring of partials as C (NOTE
// [partial as C]) in chunks of 1024 rows, at most 8, where it measured faster than fused. Not
// measured at W > 2, with C (the schedule has none), nor below N = 8192, where a 1024-row chunk's
// matmul fills less of a wave. Not when the caller asks for one chunk (no ring then).
bool ring_all_reduce(const GemmProblem& p, int world, int64_t block, int chunks_asked) {
  return p.op == Op::kGemmAr && world == 2 && partial_as_c_fits(p, world) && block >= 4096 && p.n >= 8192 &&
         chunks_asked != 1;
}
int ring_all_reduce_chunks(int64_t block) { return static_cast<int>(std::min<int64_t>(block / 1024, 8)); }

// Chunks per rank block when the options leave it open. fused: pieces of K columns. One where its
// tiles take several waves (more measured no better). At W=2, four where the tiles all start at
// once and each peer block is at least 2 MiB, so that no tile waits for a whole block (NOTE [chunk
// wait]); smaller blocks keep one. At W >= 4 one: each piece of each of the W - 1 stages is its
// own 2D copy, and their number cost more than the early start gained.
int default_chunks(const GemmProblem& p, int world, int sms, int64_t block, Impl impl) {
  if (impl == Impl::kFused) {
    const int64_t block_bytes = p.l * block * p.k * static_cast<int64_t>(dtype_size(p.dtype));
    // The SMs fused's kernel gets with the default comm_sms: fused pulls across the stages
    // exactly when the same test holds there.
    const bool one_wave = gemm::sm90::fused_tiles_one_wave(p.m, p.n, p.l, sms - kDefaultCommSms);
    return world <= 2 && one_wave && block_bytes >= 2 * kMiB ? 4 : 1;
  }
  // gemm_rs on two ranks without C, from 1024 rows per block: two chunks, each own chunk's matmul
  // adding the peer's partial of its rows (NOTE [partial as C] in plan/schedule.h), so that no
  // reduction is left at the end; below that, chunks only cost. At W > 2 the ring is not measured
  // yet: one chunk, with the reduction.
  if (impl == Impl::kPipelinedCE && p.op == Op::kGemmRs && partial_as_c_fits(p, world) && world == 2 && block >= 1024)
    return 2;
  if (impl == Impl::kPipelinedCE && ring_all_reduce(p, world, block, 0)) return ring_all_reduce_chunks(block);
  return p.op == Op::kAgGemm && impl == Impl::kPipelinedCE && block >= 2048 ? 2 : 1;
}

// fused gemm_rs and gemm_ar: SMs for the push-and-reduce kernel beside the GEMM, the best of those
// measured; gemm_ar moves twice the data, and takes twice the SMs.
constexpr int kFusedRsCommSms = 16, kFusedArCommSms = 32;

// pipelined_ce with FP8 block scales: chunks whose matmuls would take rows other than multiples of
// 4 (NOTE [gathered scales]); one chunk fits wherever impl_supported takes the problem.
bool block_scale_chunks_miss(const GemmProblem& p, const Topology& topo, Impl impl, int chunks) {
  return impl == Impl::kPipelinedCE && is_fp8(p.dtype) && p.scale_mode == ScaleMode::kBlock &&
         p.shard_dim == ShardDim::kM && chunks > 1 && p.m >= topo.world && !pipelined_pieces_fit(p, topo.world, chunks, 4);
}

Choice fill_defaults(const GemmProblem& p, const Topology& topo, Impl impl, const PlanOptions& o) {
  Choice c;
  c.impl = impl;
  c.chunks = o.chunks_per_rank > 0 ? o.chunks_per_rank
                                   : default_chunks(p, topo.world, topo.num_sms, max_block_rows(p.m, topo.world), impl);
  if (p.shard_dim == ShardDim::kN) c.chunks = 1;  // whole column blocks (NOTE [shard along N])
  if (block_scale_chunks_miss(p, topo, impl, c.chunks) && o.chunks_per_rank <= 0) c.chunks = 1;
  c.comm_sms = kDefaultCommSms;
  if (impl == Impl::kFused && p.op == Op::kGemmRs) c.comm_sms = kFusedRsCommSms;
  if (impl == Impl::kFused && p.op == Op::kGemmAr) c.comm_sms = kFusedArCommSms;
  if (o.comm_sms >= 0) c.comm_sms = o.comm_sms;
  // The rules' matmul is cuBLASLt's: the Hopper core is taken only where the tuner timed it faster.
  if (impl == Impl::kPipelinedCE) c.matmul = o.matmul == Matmul::kAuto ? Matmul::kCublasLt : o.matmul;
  return c;
}

// How full pipelined_ce's chunk matmuls keep their waves: each is (block / chunks) rows by N,
// in 128 x 256 tiles, one per SM at a time.
double pipelined_wave_fill(const GemmProblem& p, int64_t block, int chunks, int sms) {
  const int64_t tiles = (block / chunks + 127) / 128 * ((p.n + 255) / 256), slots = sms;
  return static_cast<double>(tiles) / static_cast<double>((tiles + slots - 1) / slots * slots);
}

// allgather_gemm / gemm_reducescatter, the symmetric collective behind one matmul: measured
// faster than pipelined_ce and the baseline, along M, on rank blocks of fewer than 512 rows at
// W=2 and 256 at W=4, down to one row (W=3 and W > 4 follow W=4, unmeasured).
bool small_m_collective(const GemmProblem& p, const Topology& topo, bool along_n, Impl impl) {
  const int64_t below = topo.world == 2 ? 512 : 256;
  return topo.world >= 2 && !along_n && max_block_rows(p.m, topo.world) < below && impl_supported(p, impl, topo).ok();
}

Impl choose_ag_gemm(const GemmProblem& p, const Topology& topo, bool along_n) {
  if (small_m_collective(p, topo, along_n, Impl::kAllGatherGemm)) return Impl::kAllGatherGemm;
  const int64_t block = max_block_rows(p.m, topo.world);
  if (block < 256) return Impl::kBaseline;
  const double fill = pipelined_wave_fill(
      p, block, default_chunks(p, topo.world, topo.num_sms, block, Impl::kPipelinedCE), topo.num_sms);
  if (topo.world >= 4 && block >= 1024 && fill < 0.9 && impl_supported(p, Impl::kFused, topo).ok())
    return Impl::kFused;
  return Impl::kPipelinedCE;
}

Impl choose_gemm_rs(const GemmProblem& p, const Topology& topo, bool along_n) {
  if (small_m_collective(p, topo, along_n, Impl::kGemmReduceScatter)) return Impl::kGemmReduceScatter;
  return max_block_rows(p.m, topo.world) >= 256 ? Impl::kPipelinedCE : Impl::kBaseline;
}

Impl choose_gemm_ar(const GemmProblem& p, const Topology& topo, int chunks_asked) {
  const int64_t d_bytes = p.l * p.m * p.n * static_cast<int64_t>(dtype_size(d_dtype(p)));
  if (ring_all_reduce(p, topo.world, max_block_rows(p.m, topo.world), chunks_asked)) return Impl::kPipelinedCE;
  // fused from 16 MiB of D per rank at W=2, 8 MiB at W >= 4, where it measured faster.
  if (d_bytes / topo.world >= (topo.world >= 4 ? 8 : 16) * kMiB)  // (not the decode kernel: see below)
    return impl_supported(p, Impl::kFused, topo).ok() && !fused_ar_decode(p, topo.world) ? Impl::kFused
                                                                                          : Impl::kPipelinedCE;
  if (topo.world > 2 && d_bytes > 4 * kMiB) return Impl::kBaseline;  // two-shot measured within noise of it
  // fused's decode kernel at W=2 where it was measured faster than the matmul then the all-reduce:
  // M = 16, 32 or 64, one tile row (B read once) and at least 128 tiles, one per SM. Not yet
  // measured at W > 2, nor with several tile rows or fewer tiles.
  const bool measured_decode = (p.m == 16 || p.m == 32 || p.m == 64) && p.l * (p.n / 64) >= 128;
  if (topo.world == 2 && measured_decode && fused_ar_decode(p, topo.world) && impl_supported(p, Impl::kFused, topo).ok())
    return Impl::kFused;
  switch (choose_allreduce(d_bytes, topo)) {
    case AllReduceImpl::kOneShot: return Impl::kGemmOneShot;
    // Behind a matmul, one-shot beats two-shot further than it does alone (docs/planner.md).
    case AllReduceImpl::kTwoShot:
      return d_bytes <= (topo.world > 2 ? 256 * 1024 : 2 * kMiB) ? Impl::kGemmOneShot : Impl::kGemmTwoShot;
    default: return Impl::kBaseline;
  }
}

}  // namespace

bool fixed_reduction_order(const GemmProblem& p, Impl impl, int world) {
  return p.op == Op::kAgGemm || impl != Impl::kBaseline || world == 1;
}

Status deterministic_supported(const GemmProblem& p, Impl impl, int world) {
  if (fixed_reduction_order(p, impl, world)) return Status::Ok();
  return {ErrorCode::kUnsupported,
          strfmt("deterministic=true with impl=%s: %s sums the partial products in NCCL, whose order is not fixed; "
                 "expected another implementation, or impl=auto",
                 std::string(to_string(impl)).c_str(), std::string(to_string(p.op)).c_str())};
}

namespace {

// PlanOptions::deterministic: where the rules chose a sum in NCCL, the first implementation of
// the op with a fixed order that serves the problem (collective then matmul, then the pipeline);
// the baseline still where none does, which the plan then refuses.
Impl deterministic_choice(const GemmProblem& p, const Topology& topo, Impl impl) {
  if (fixed_reduction_order(p, impl, topo.world)) return impl;
  const Impl first = p.op == Op::kGemmRs ? Impl::kGemmReduceScatter : Impl::kGemmTwoShot;
  for (Impl alt : {first, Impl::kGemmOneShot, Impl::kPipelinedCE})
    if ((alt != Impl::kGemmOneShot || p.op == Op::kGemmAr) && impl_supported(p, alt, topo).ok()) return alt;
  return impl;
}

}  // namespace

Choice choose(const GemmProblem& p, const Topology& topo, const PlanOptions& options) {
  if (options.impl != Impl::kAuto) return fill_defaults(p, topo, options.impl, options);
  const bool symmetric = topo.world > 1 && topo.all_lsa_peers && topo.world <= kMaxSymmetricWorld;
  if (!symmetric) {
    const Impl impl = options.deterministic ? deterministic_choice(p, topo, Impl::kBaseline) : Impl::kBaseline;
    return fill_defaults(p, topo, impl, options);
  }
  // Along N, pipelined_ce runs the schedule of the transposed problem, whose chunk matmuls are
  // the same size: its rules apply, fused aside (along M only; NOTE [shard along N]).
  const bool along_n = p.shard_dim == ShardDim::kN;
  const GemmProblem q = along_n ? transposed(p) : p;
  Impl impl = Impl::kBaseline;
  switch (q.op) {
    case Op::kAgGemm: impl = choose_ag_gemm(q, topo, along_n); break;
    case Op::kGemmRs: impl = choose_gemm_rs(q, topo, along_n); break;
    case Op::kGemmAr: impl = choose_gemm_ar(q, topo, options.chunks_per_rank); break;  // (along M only: q is p)
  }
  if (along_n && impl == Impl::kFused) impl = Impl::kPipelinedCE;
  // The rules above pick by shape; what the problem rules out besides (an output type of its
  // own, say) leaves the baseline.
  if (!impl_supported(p, impl, topo).ok()) impl = Impl::kBaseline;
  if (options.deterministic) impl = deterministic_choice(p, topo, impl);
  // Chunks the caller asked for that block-scaled pipelined_ce cannot take: not its choice either
  // (the default chunks always fit: fill_defaults).
  if (block_scale_chunks_miss(p, topo, impl, options.chunks_per_rank))
    impl = options.deterministic ? deterministic_choice(p, topo, Impl::kBaseline) : Impl::kBaseline;
  return fill_defaults(p, topo, impl, options);
}

bool takes_any_m(const GemmProblem& p, Impl impl, Matmul matmul) {
  switch (impl) {
    case Impl::kBaseline:
    case Impl::kAllGatherGemm:
    case Impl::kGemmReduceScatter:
    case Impl::kGemmOneShot:
    case Impl::kGemmTwoShot: return true;
    case Impl::kPipelinedCE: return !is_fp8(p.dtype) && matmul != Matmul::kSm90;
    default: return false;
  }
}

Choice choose_any_m(const GemmProblem& p, const Topology& topo, const PlanOptions& options) {
  Choice c = choose(p, topo, options);
  // The range's calls run from about half its top up: pipelined_ce, which the rules take from some
  // rows per block up, only where it is their choice at the range's bottom too.
  GemmProblem bottom = p;
  bottom.m = range_bottom(p, topo.world, p.m);
  if (takes_any_m(p, c.impl, c.matmul) &&
      (c.impl != Impl::kPipelinedCE || choose(bottom, topo, options).impl == Impl::kPipelinedCE))
    return c;
  // Else the collective-then-matmul implementation of the op, where it serves the problem (the
  // rules pick those below the overlapped ones' range).
  Impl impl = Impl::kBaseline;
  if (p.op == Op::kAgGemm) impl = Impl::kAllGatherGemm;
  if (p.op == Op::kGemmRs) impl = Impl::kGemmReduceScatter;
  if (p.op == Op::kGemmAr) impl = Impl::kGemmTwoShot;
  if (!topo.all_lsa_peers || topo.world < 2 || !impl_supported(p, impl, topo).ok()) impl = Impl::kBaseline;
  return fill_defaults(p, topo, impl, options);
}

bool pipelined_core_possible(const GemmProblem& p, const Topology& topo) {
  return topo.all_sm90 && p.shard_dim == ShardDim::kM && p.a_layout == ALayout::kMK &&
         (p.dtype == DType::kBF16 || p.dtype == DType::kFP16) && d_dtype(p) == p.dtype && p.n % 8 == 0 && p.k % 8 == 0;
}

std::vector<Choice> candidates(const GemmProblem& p, const Topology& topo, const PlanOptions& options, bool any_m) {
  std::vector<Choice> out;
  const auto add = [&](Impl impl, int chunks, int comm_sms = -1, Matmul matmul = Matmul::kAuto) {
    if (options.deterministic && !fixed_reduction_order(p, impl, topo.world)) return;
    if (!impl_supported(p, impl, topo).ok()) return;
    if (options.return_gathered_a && !gathered_a_supported(p, impl).ok()) return;
    PlanOptions o = options;
    o.impl = impl;
    o.chunks_per_rank = options.chunks_per_rank > 0 ? options.chunks_per_rank : chunks;
    if (options.comm_sms < 0 && comm_sms >= 0) o.comm_sms = comm_sms;
    if (options.matmul == Matmul::kAuto) o.matmul = matmul;
    const Choice c = fill_defaults(p, topo, impl, o);
    if (any_m && !takes_any_m(p, impl, c.matmul)) return;
    if (block_scale_chunks_miss(p, topo, impl, c.chunks)) return;
    if (c.matmul == Matmul::kSm90 && !pipelined_core_possible(p, topo)) return;
    for (const Choice& seen : out)
      if (seen == c) return;
    out.push_back(c);
  };
  add(Impl::kBaseline, 0);  // first: of equal times, the earlier candidate wins
  // A team of one too: there each implementation is its matmul with a copy or none (the baseline
  // copies A through NCCL), and which is fastest is measured as anywhere else.
  const bool symmetric = topo.all_lsa_peers && topo.world <= kMaxSymmetricWorld;
  if (!symmetric) return out;
  const int64_t block = max_block_rows(p.shard_dim == ShardDim::kN ? p.n : p.m, topo.world);
  switch (p.op) {
    case Op::kAgGemm: add(Impl::kAllGatherGemm, 0); break;
    case Op::kGemmRs: add(Impl::kGemmReduceScatter, 0); break;
    case Op::kGemmAr:
      add(Impl::kGemmOneShot, 0);
      add(Impl::kGemmTwoShot, 0);
      break;
  }
  // The overlapped implementations and their main knob, the pieces each rank block is cut into
  // (along N a block moves whole): one, the rules' choice, and more while a piece keeps at least
  // 128 rows, one tile of the matmuls. pipelined_ce's matmuls both ways where the Hopper core
  // serves the problem: neither was faster on every shape and chunk count (docs/planner.md).
  for (int chunks : {0, 1, 2, 4, 8}) {
    if (chunks > 1 && (p.shard_dim == ShardDim::kN || block / chunks < 128)) continue;
    add(Impl::kPipelinedCE, chunks, -1, Matmul::kCublasLt);
    add(Impl::kPipelinedCE, chunks, -1, Matmul::kSm90);
  }
  // The fused reductions' tile path only where its tiles outlast a wave (the decode kernel, and
  // the fused AllGather+GEMM, always): in one wave the kernel is the matmul then the reduction on
  // SMs, which gemm_reducescatter and gemm_twoshot do already (docs/planner.md, "Candidates").
  const bool tile_path = p.op == Op::kGemmRs || (p.op == Op::kGemmAr && !fused_ar_decode(p, topo.world));
  if (tile_path && gemm::sm90::fused_tiles_one_wave(p.m, p.n, p.l, topo.num_sms)) return out;
  add(Impl::kFused, 0);
  if (p.op == Op::kAgGemm) add(Impl::kFused, 1);
  // The fused reductions' other knob, the SMs that push and sum tiles beside the GEMM: the other
  // counts the sweeps ran and checked too (gemm_rs 4 and 8, gemm_ar 8 and 16; docs/planner.md),
  // since the best on the shared shapes need not be another shape's. Not for the decode kernel,
  // which has no such split.
  if (tile_path)
    for (int sms : p.op == Op::kGemmRs ? std::array<int, 2>{4, 8} : std::array<int, 2>{8, 16})
      add(Impl::kFused, 0, sms);
  return out;
}

int fastest(const std::vector<Choice>& candidates, const std::vector<double>& ms) {
  // Leaving the baseline must pay for the risk: the planner's timing and a later one of the same
  // plans differed by up to 2% on large shapes (docs/planner.md).
  constexpr double kTie = 1.01, kBaselineTie = 1.02;
  int best = -1;
  for (size_t i = 0; i < candidates.size() && i < ms.size(); ++i) {
    if (ms[i] < 0) continue;
    const double tie = best >= 0 && candidates[static_cast<size_t>(best)].impl == Impl::kBaseline ? kBaselineTie : kTie;
    if (best < 0 || ms[i] * tie < ms[static_cast<size_t>(best)]) best = static_cast<int>(i);
  }
  return best;
}

std::vector<size_t> near_ties(const std::vector<Choice>& candidates, const std::vector<double>& ms, double within,
                              size_t most) {
  const int pick = fastest(candidates, ms);
  if (pick < 0 || most < 2) return {};
  const double bound = ms[static_cast<size_t>(pick)] * within;
  std::vector<size_t> others;
  for (size_t i = 0; i < candidates.size() && i < ms.size(); ++i)
    if (ms[i] >= 0 && ms[i] <= bound && i != static_cast<size_t>(pick)) others.push_back(i);
  if (others.empty()) return {};
  std::stable_sort(others.begin(), others.end(), [&](size_t x, size_t y) { return ms[x] < ms[y]; });
  others.resize(std::min(others.size(), most - 1));
  others.push_back(static_cast<size_t>(pick));
  std::sort(others.begin(), others.end());
  return others;
}

// The all-reduce by message size: one-shot (one store flight, W - 1 copies sent) while latency
// rules, two-shot (two flights, 2 (W - 1) / W sent) up to where NCCL's ring overtakes it; the
// bounds come from runs timed back to back and from CUDA graphs (docs/planner.md).
int64_t allreduce_largest(AllReduceImpl impl, const Topology& topo) {
  if (topo.world == 1 || !topo.all_lsa_peers || topo.world > kMaxSymmetricWorld) return 0;
  const bool two = topo.world == 2;
  switch (impl) {
    case AllReduceImpl::kOneShot: return (two ? 1024 : 64) * int64_t(1024);
    case AllReduceImpl::kTwoShot: return (two ? 256 : 16) * kMiB;
    default: return 0;
  }
}

AllReduceImpl choose_allreduce(int64_t bytes, const Topology& topo) {
  if (bytes > 0 && bytes <= allreduce_largest(AllReduceImpl::kOneShot, topo)) return AllReduceImpl::kOneShot;
  if (bytes > 0 && bytes <= allreduce_largest(AllReduceImpl::kTwoShot, topo)) return AllReduceImpl::kTwoShot;
  return AllReduceImpl::kNccl;
}

}  // namespace tpgemm::plan
