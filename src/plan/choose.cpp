#include "plan/choose.h"

#include <algorithm>
#include <vector>

#include "gemm/sm90_config.h"
#include "plan/schedule.h"  // partial_as_c_fits

namespace tpgemm::plan {

// NOTE [planner rules]
// Measured on 4 x H200 (NV18 all-to-all) at W = 2 and 4, bf16, by tpgemm-bench over the
// shared shapes and bench/ar_sweep.txt, every implementation side by side with the baseline
// (docs/perf.md, bench/results/2026-11-22-*). A rule sends a shape to an overlapped
// implementation only where it measured faster than the baseline; everything else stays on
// the baseline, so auto is never knowingly slower than NCCL + cuBLAS.
//   ag_gemm  At W=2 from 128 to 511 rows per rank block, tpgemm's all-gather kernel, then one
//            matmul (allgather_gemm; bench/ag_sweep.txt: M=256 1.29x, M=512 1.21x and N=3584 1.42x,
//            against pipelined_ce's 0.87x, 1.15x, 1.18x; at M=1024 1.12x against 1.19x;
//            bench/results/2026-11-22-reducescatter). At W >= 4 from 64 to 255 rows per block
//            (bench/ag_sweep.txt at W=4: M=256 1.38x, M=512 1.22x and N=3584 1.32x, against
//            pipelined_ce's 0.56x, 0.80x, 0.90x; at 256 rows per block 0.227 ms against
//            pipelined_ce's 0.221; bench/results/2026-11-22-fused-ar). Not measured along N or
//            below those sizes: there the rules below.
//            pipelined_ce from 256 rows per rank block (W=4, 128 rows: 0.81x); two chunks per
//            block from 2048 rows (W=4 M=8192: 1.29x against 1.14x with one). At W >= 4, fused
//            from 1024 rows per block where pipelined's chunk matmuls would leave more than 10%
//            of their last wave of 128x256 tiles empty: W=4 M=16384 N=3584 (85%), fused 1.33-1.37x
//            against pipelined 1.24-1.26x over three runs; where the waves fill, the two measured
//            within 3% of each other. At W=2 (one peer, whose 64-128 MB block takes longer to pull
//            than the own block takes to multiply) fused measured 1.21-1.22x against 1.19-1.31x.
//   gemm_rs  At W=2 from 64 to 511 rows per block, the matmul then tpgemm's reduce-scatter
//            kernel (gemm_reducescatter; bench/rs_sweep.txt, M=128-512: 1.07-1.28x against
//            pipelined_ce's 0.65-1.13x; M=1024: 1.16x against 1.27x; bench/results/
//            2026-11-22-reducescatter). At W >= 4 from 32 to 255 rows per block (bench/rs_sweep.txt
//            at W=4, M=128-512: 1.16-1.44x against pipelined_ce's 0.64-0.99x; M=1024, 256 rows:
//            0.112 ms against pipelined_ce's 0.096; bench/results/2026-11-22-fused-ar). Not
//            measured along N or below those sizes: there the rule below.
//            pipelined_ce from 256 rows per block (W=4 M=512, 128 rows: 1.01x, within noise);
//            one chunk (two measured no better), except at W=2 without C from 1024 rows per block:
//            two, with the peer's partial added in the own chunks' epilogues (NOTE [partial as C]).
//            fused (the GEMM core flagging tiles, SMs pushing them) measured slower than
//            pipelined_ce on every shared shape at W=2 (0.319 against 0.245 ms at M=4096;
//            bench/results/2026-11-22-fused-rs): never chosen.
//   gemm_ar  From 16 MB of D per rank (8 MB at W >= 4) fused (the GEMM core flagging tiles, SMs
//            beside it pushing partials to their owners and sums back) where M is whole 128-row
//            tiles per rank: W=4 M=4096, 8192, 16384: 1.24x, 1.41x, 1.42x against pipelined_ce's
//            1.10x, 1.21-1.25x, 1.27x, and M=2048: 1.18-1.19x where the baseline ran; W=2 M=2048
//            to 16384: 1.23-1.34x against 1.08-1.26x (bench/results/2026-11-22-fused-ar, -tuning;
//            W > 4 unmeasured). Else pipelined_ce, one round (W=4 M=8192: 1.21x). At W=2 without C,
//            from 4096 rows per block and N = 8192 up, pipelined_ce's ring of partials as C in
//            chunks of 1024 rows instead (M=8192: 0.580 ms against fused's 0.636; M=16384: 1.066
//            against 1.211; `ring_all_reduce` below). Below that the
//            matmul then the all-reduce the rule below picks for D's size (W=4: gemm_twoshot
//            1.30x at M=128), except at W=2 for M = 16, 32, 64 over at least 128 tiles: fused's
//            decode kernel (NOTE [fused decode]; 0.019-0.025 ms against 0.023-0.028), and except at
//            W > 2 beyond 4 MB of D, where gemm_twoshot measured 0.93-1.06x over four runs
//            (M=1024): the baseline; gemm_oneshot further than the all-reduce alone would take
//            one-shot (W=4 up to 256 KB of D, W=2 up to 2 MB; see below).
// Along N (shard_dim n) the rules of the transposed problem, without fused (NOTE [shard along N]).
// Unmeasured world sizes (W > 4) follow the W = 4 rules.
namespace {

constexpr int64_t kMiB = int64_t(1) << 20;

constexpr int kDefaultCommSms = 2;

// gemm_ar at W=2 without C, from 4096 rows per block: the ring of partials as C (NOTE [partial as
// C]), in chunks of 1024 rows, at most 8. W=2, N=8192, K=2048, ms (bench/results/2026-11-23-ring):
//   M      fused (32 SMs)  ring, 2 / 4 / 8 chunks
//   2048   0.193           0.210 / 0.221 / 0.404
//   4096   0.341           0.349 / 0.340 / 0.425
//   8192   0.636           0.687 / 0.580 / 0.645   (4 chunks: 0.582 in a second call)
//   16384  1.211           1.246 / 1.148 / 1.066
// Not measured at W > 2, with C (the schedule has none), nor below N = 8192, where a 1024-row
// chunk's matmul fills less of a wave. Not when the caller asks for one chunk (no ring then).
bool ring_all_reduce(const GemmProblem& p, int world, int64_t block, int chunks_asked) {
  return p.op == Op::kGemmAr && world == 2 && partial_as_c_fits(p, world) && block >= 4096 && p.n >= 8192 &&
         chunks_asked != 1;
}
int ring_all_reduce_chunks(int64_t block) { return static_cast<int>(std::min<int64_t>(block / 1024, 8)); }

// Chunks per rank block when the options leave it open. fused: pieces of K columns. One where
// its tiles take several waves (more pieces measured no better there, W=2, and neither did
// pieces of rows at W=4: bench/results/2026-11-22-fused, -ladder). Four where they all start at
// once and each peer block is at least 2 MiB (W=2, 512 x 8192 x 8192, 4 MiB blocks: 0.138 ms
// against 0.149 with one piece), so that no tile waits for a whole block (NOTE [chunk wait]);
// smaller blocks keep one (1024^3, 1 MiB blocks: 0.070 ms with four against 0.057 with one, in
// two runs). At W >= 4 one piece: there each piece of each of the W - 1 stages is its own 2D
// copy of 4 KiB rows, and 12 of them took longer than the three whole blocks (W=4, 512 x 8192
// x 8192: 0.198 and 0.195 ms with four pieces, 0.176 and 0.192 with two, 0.174 and 0.166 with
// one, two calls; with every piece pulled before the kernel starts, 0.245 against 0.167:
// bench/results/2026-11-22-tuning).
int default_chunks(const GemmProblem& p, int world, int sms, int64_t block, Impl impl) {
  if (impl == Impl::kFused) {
    const int64_t block_bytes = p.l * block * p.k * static_cast<int64_t>(dtype_size(p.dtype));
    // The SMs fused's kernel gets with the default comm_sms: fused pulls across the stages
    // exactly when the same test holds there.
    const bool one_wave = gemm::sm90::chunk_wait_one_wave(p.m, p.n, p.l, sms - kDefaultCommSms);
    return world <= 2 && one_wave && block_bytes >= 2 * kMiB ? 4 : 1;
  }
  // gemm_rs on two ranks without C, from 1024 rows per block: two chunks, each own chunk's matmul
  // adding the peer's partial of its rows (NOTE [partial as C] in plan/schedule.h), so that no
  // reduction is left at the end. One call at W=2 (bench/results/2026-11-23-partial-as-c), ms,
  // against one chunk with the reduction: 4096 x 8192 x 2048 0.231 (0.257), 8192: 0.489 (0.469),
  // 16384: 0.863 (0.910), 16384 x 8192 x 7168: 2.897 (3.075); four chunks 0.244, 0.439, 0.936,
  // 2.974; eight 0.273, 0.459, 0.878, 3.025. At 256 rows per block chunks only cost (512 rows:
  // 0.069 ms with one, 0.089 with two), and there auto takes gemm_reducescatter anyway. At 1024
  // rows per block (2048 x 8192 x 2048) two took 0.131 and 0.134 ms in two calls, one 0.144; at
  // 512 two took 0.089, one 0.082 (bench/results/2026-11-23-ring). At W > 2 the ring (the same
  // schedule) is not measured yet: one chunk, with the reduction.
  if (impl == Impl::kPipelinedCE && p.op == Op::kGemmRs && partial_as_c_fits(p, world) && world == 2 && block >= 1024)
    return 2;
  if (impl == Impl::kPipelinedCE && ring_all_reduce(p, world, block, 0)) return ring_all_reduce_chunks(block);
  return p.op == Op::kAgGemm && impl == Impl::kPipelinedCE && block >= 2048 ? 2 : 1;
}

// fused gemm_rs and gemm_ar: SMs for the push-and-reduce kernel beside the GEMM. gemm_rs: 16 was
// the best of 0, 4, 8 and 16 at W=2 on the shared shapes (4096 x 8192 x 2048: 0.319 ms against
// 0.346 with 0; bench/results/2026-11-22-fused-rs). gemm_ar moves twice the data: 32 was the
// best of 8, 16 and 32 at W=4 (M=8192: 0.926, 0.831, 0.699 ms) and of 16, 32, 48 and 64 at W=2
// (0.812, 0.710, 0.727, 0.819 ms; bench/results/2026-11-22-fused-ar).
constexpr int kFusedRsCommSms = 16, kFusedArCommSms = 32;

Choice fill_defaults(const GemmProblem& p, const Topology& topo, Impl impl, const PlanOptions& o) {
  Choice c;
  c.impl = impl;
  c.chunks = o.chunks_per_rank > 0 ? o.chunks_per_rank
                                   : default_chunks(p, topo.world, topo.num_sms, max_block_rows(p.m, topo.world), impl);
  if (p.shard_dim == ShardDim::kN) c.chunks = 1;  // whole column blocks (NOTE [shard along N])
  c.comm_sms = kDefaultCommSms;
  if (impl == Impl::kFused && p.op == Op::kGemmRs) c.comm_sms = kFusedRsCommSms;
  if (impl == Impl::kFused && p.op == Op::kGemmAr) c.comm_sms = kFusedArCommSms;
  if (o.comm_sms >= 0) c.comm_sms = o.comm_sms;
  return c;
}

// How full pipelined_ce's chunk matmuls keep their waves: each is (block / chunks) rows by N,
// in 128 x 256 tiles, one per SM at a time.
double pipelined_wave_fill(const GemmProblem& p, int64_t block, int chunks, int sms) {
  const int64_t tiles = (block / chunks + 127) / 128 * ((p.n + 255) / 256), slots = sms;
  return static_cast<double>(tiles) / static_cast<double>((tiles + slots - 1) / slots * slots);
}

// allgather_gemm / gemm_reducescatter, the symmetric collective behind one matmul: measured
// faster than pipelined_ce and the baseline, along M, on rank blocks of [first, end) rows, at
// W=2 and at W=4 (W=3 and W > 4 follow W=4, unmeasured).
struct BlockRows {
  int64_t first, end;
};
bool small_m_collective(const GemmProblem& p, const Topology& topo, bool along_n, BlockRows at_w2, BlockRows at_w4,
                        Impl impl) {
  const int64_t block = max_block_rows(p.m, topo.world);
  const BlockRows r = topo.world == 2 ? at_w2 : at_w4;
  return topo.world >= 2 && !along_n && block >= r.first && block < r.end && impl_supported(p, impl, topo).ok();
}

Impl choose_ag_gemm(const GemmProblem& p, const Topology& topo, bool along_n) {
  if (small_m_collective(p, topo, along_n, {128, 512}, {64, 256}, Impl::kAllGatherGemm)) return Impl::kAllGatherGemm;
  const int64_t block = max_block_rows(p.m, topo.world);
  if (block < 256) return Impl::kBaseline;
  const double fill = pipelined_wave_fill(
      p, block, default_chunks(p, topo.world, topo.num_sms, block, Impl::kPipelinedCE), topo.num_sms);
  if (topo.world >= 4 && block >= 1024 && fill < 0.9 && impl_supported(p, Impl::kFused, topo).ok())
    return Impl::kFused;
  return Impl::kPipelinedCE;
}

Impl choose_gemm_rs(const GemmProblem& p, const Topology& topo, bool along_n) {
  if (small_m_collective(p, topo, along_n, {64, 512}, {32, 256}, Impl::kGemmReduceScatter))
    return Impl::kGemmReduceScatter;
  return max_block_rows(p.m, topo.world) >= 256 ? Impl::kPipelinedCE : Impl::kBaseline;
}

Impl choose_gemm_ar(const GemmProblem& p, const Topology& topo, int chunks_asked) {
  const int64_t d_bytes = p.l * p.m * p.n * static_cast<int64_t>(dtype_size(p.dtype));
  if (ring_all_reduce(p, topo.world, max_block_rows(p.m, topo.world), chunks_asked)) return Impl::kPipelinedCE;
  // fused from 16 MiB of D per rank at W=2, 8 MiB at W >= 4 (W=4, M=2048: 1.19x and 1.18x over
  // the baseline, two calls; bench/results/2026-11-22-tuning).
  if (d_bytes / topo.world >= (topo.world >= 4 ? 8 : 16) * kMiB)  // (not the decode kernel: see below)
    return impl_supported(p, Impl::kFused, topo).ok() && !fused_ar_decode(p, topo.world) ? Impl::kFused
                                                                                          : Impl::kPipelinedCE;
  if (topo.world > 2 && d_bytes > 4 * kMiB) return Impl::kBaseline;  // 0.93-1.06x: within noise
  // fused's decode kernel at W=2 where it was measured: M = 16, 32 or 64, one tile row (B read
  // once), and at least 128 tiles, one per SM (M x 8192 x 2048: 0.019-0.025 ms against the best of
  // gemm_oneshot and gemm_twoshot, 0.023-0.028; M=128: a tie; bench/results/2026-11-23-decode).
  // Without its parameters' copy in local memory (NOTE [one-load prologue]) the same: 0.017-0.023
  // ms against 0.021-0.029 at M = 16-64, a tie at M=128 (0.028-0.029), 0.062 against 0.043 at
  // M=256 (bench/results/2026-11-23-prologue, decode-h200x2).
  // Not yet measured at W > 2, nor with several tile rows or fewer tiles.
  const bool measured_decode = (p.m == 16 || p.m == 32 || p.m == 64) && p.l * (p.n / 64) >= 128;
  if (topo.world == 2 && measured_decode && fused_ar_decode(p, topo.world) && impl_supported(p, Impl::kFused, topo).ok())
    return Impl::kFused;
  switch (choose_allreduce(d_bytes, topo)) {
    case AllReduceImpl::kOneShot: return Impl::kGemmOneShot;
    // Behind a matmul, one-shot beats two-shot beyond where it does alone: at W=4 up to 256 KB of
    // D (M=16: 1.19x against 1.14x and 1.16x, two calls), at W=2 up to 2 MB (M=128 x 8192 x
    // 2048: 27.5 / 28.1 / 29 / 30 us against 28.5 / 28.6 / 31 / 31 in four runs of two calls,
    // bench/results/2026-11-23-prologue; 4 MB: a tie).
    case AllReduceImpl::kTwoShot:
      return d_bytes <= (topo.world > 2 ? 256 * 1024 : 2 * kMiB) ? Impl::kGemmOneShot : Impl::kGemmTwoShot;
    default: return Impl::kBaseline;
  }
}

}  // namespace

Choice choose(const GemmProblem& p, const Topology& topo, const PlanOptions& options) {
  if (options.impl != Impl::kAuto) return fill_defaults(p, topo, options.impl, options);
  const bool symmetric = topo.world > 1 && topo.all_lsa_peers && topo.world <= kMaxSymmetricWorld;
  if (!symmetric) return fill_defaults(p, topo, Impl::kBaseline, options);
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
  return fill_defaults(p, topo, impl, options);
}

bool takes_any_m(Impl impl) {
  return impl == Impl::kBaseline || impl == Impl::kAllGatherGemm || impl == Impl::kGemmReduceScatter ||
         impl == Impl::kGemmOneShot || impl == Impl::kGemmTwoShot;
}

Choice choose_any_m(const GemmProblem& p, const Topology& topo, const PlanOptions& options) {
  Choice c = choose(p, topo, options);
  if (takes_any_m(c.impl)) return c;
  // The rules' choice needs its exact M: the collective-then-matmul implementation of the op, where
  // it serves the problem, in its place (the rules pick those below the overlapped ones' range).
  Impl impl = Impl::kBaseline;
  if (p.op == Op::kAgGemm) impl = Impl::kAllGatherGemm;
  if (p.op == Op::kGemmRs) impl = Impl::kGemmReduceScatter;
  if (p.op == Op::kGemmAr) impl = Impl::kGemmTwoShot;
  if (!topo.all_lsa_peers || topo.world < 2 || !impl_supported(p, impl, topo).ok()) impl = Impl::kBaseline;
  return fill_defaults(p, topo, impl, options);
}

std::vector<Choice> candidates(const GemmProblem& p, const Topology& topo, const PlanOptions& options, bool any_m) {
  std::vector<Choice> out;
  const auto add = [&](Impl impl, int chunks) {
    if (any_m && !takes_any_m(impl)) return;
    if (!impl_supported(p, impl, topo).ok()) return;
    if (options.return_gathered_a && !gathered_a_supported(p, impl).ok()) return;
    PlanOptions o = options;
    o.impl = impl;
    o.chunks_per_rank = options.chunks_per_rank > 0 ? options.chunks_per_rank : chunks;
    const Choice c = fill_defaults(p, topo, impl, o);
    for (const Choice& seen : out)
      if (seen.impl == c.impl && seen.chunks == c.chunks && seen.comm_sms == c.comm_sms) return;
    out.push_back(c);
  };
  add(Impl::kBaseline, 0);  // first: of equal times, the earlier candidate wins
  const bool symmetric = topo.world > 1 && topo.all_lsa_peers && topo.world <= kMaxSymmetricWorld;
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
  // 128 rows, one tile of the matmuls.
  for (int chunks : {0, 1, 2, 4, 8}) {
    if (chunks > 1 && (p.shard_dim == ShardDim::kN || block / chunks < 128)) continue;
    add(Impl::kPipelinedCE, chunks);
  }
  add(Impl::kFused, 0);
  if (p.op == Op::kAgGemm) add(Impl::kFused, 1);
  return out;
}

// All-reduce, timed back to back and from CUDA graphs (bench/results/2026-11-22-allreduce):
// at W=2 one-shot is the fastest up to 1 MB (since the one-load prologue, NOTE [one-load
// prologue]: graph-timed 6.0 us against two-shot's 6.6 at 1 MB, two calls; it was up to 256 KB
// before, bench/results/2026-11-23-prologue), two-shot up to 256 MB (1.09-1.72x NCCL) and NCCL
// above (two-shot 0.97x at 1 GB); at W=4 one-shot up to 64 KB (1.7-1.9x), two-shot up to 16 MB
// (1.15-1.57x), NCCL above (two-shot 0.88x at 64 MB).
AllReduceImpl choose_allreduce(int64_t bytes, const Topology& topo) {
  if (topo.world == 1 || !topo.all_lsa_peers || topo.world > kMaxSymmetricWorld) return AllReduceImpl::kNccl;
  const bool two = topo.world == 2;
  if (bytes <= (two ? 1024 : 64) * 1024) return AllReduceImpl::kOneShot;
  if (bytes <= (two ? 256 : 16) * kMiB) return AllReduceImpl::kTwoShot;
  return AllReduceImpl::kNccl;
}

}  // namespace tpgemm::plan
