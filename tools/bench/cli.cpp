#include "bench/cli.h"

#include <cmath>
#include <cstdlib>

#include "bench/shapes.h"
#include "core/env.h"
#include "core/format.h"
#include "tpgemm/error.h"

namespace tpgemm::bench {
namespace {

Error bad(const std::string& flag, const std::string& value, const std::string& expected) {
  return Error(ErrorCode::kInvalidArgument, strfmt("%s=%s: expected %s", flag.c_str(), value.c_str(), expected.c_str()));
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    const size_t e = s.find(',', b);
    out.push_back(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    if (e == std::string::npos) break;
    b = e + 1;
  }
  return out;
}

int64_t int_arg(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
  const auto x = parse_int(v);
  if (!x || *x < lo || *x > hi) throw bad(flag, v, strfmt("an integer in [%lld, %lld]", (long long)lo, (long long)hi));
  return *x;
}

double float_arg(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !std::isfinite(x)) throw bad(flag, v, "a finite number");
  return x;
}

}  // namespace

std::string usage() {
  return R"(usage: tpgemm-bench [flags]
Times tpgemm's tensor-parallel GEMMs against NCCL+cuBLAS on this machine's GPUs (one process
per GPU, forked here), or on the ranks torchrun / mpirun started (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT). With no flags: every op, every implementation, the shared shape set,
all local GPUs.

  --op=LIST              ag_gemm, gemm_rs, gemm_ar, allreduce, gemm or all (comma-separated; default
                         all: every op but gemm). gemm: each GPU's local matmul alone (the M N K of
                         the shape set's ag and rs lines), cuBLASLt against every configuration of
                         tpgemm's Hopper GEMM core, its own choice (sm90_auto: measured per
                         shape, or TPGEMM_SM90_CONFIG's), its rule's (sm90_rule) and the fused
                         gemm_rs / gemm_ar kernel (coop_128x256_c2x1+tile_signal); the ratio
                         column is cuBLASLt's time over the row's
  --impl=LIST            baseline, pipelined_ce, gemm_oneshot, gemm_twoshot, gemm_reducescatter,
                         allgather_gemm, fused, auto; for
                         allreduce nccl, oneshot, twoshot, auto; or all (default all). The ladder
                         of the nvFuser study (ag_gemm; slow, so only when named): naive_remote,
                         threadload_gather, gather_then_gemm, or ladder for those three and fused
  --m= --n= --k=         one shape (the per-GPU GEMM is M x N x K; K is the local shard for
                         gemm_rs / gemm_ar); without them, the shape file
  --l=                   batch count (default 1)
  --bytes=               one all-reduce size in bytes per rank
  --shapes=FILE          shape file ('op M N K' or 'allreduce BYTES' per line; default: the
                         built-in copy of bench/shapes.txt and bench/allreduce_sizes.txt)
  --random=N             N shapes per GEMM op drawn at random instead (the work M*N*K
                         log-uniform, split among M, N, K at random; M < W possible for
                         gemm_ar; N and K multiples of 8, every other one odd); with --op gemm,
                         N local matmuls
  --seed=S               the draw's seed (default: from the clock; printed and kept in the JSON)
  --plan-m=P             every plan but the baseline's made for P rows (a multiple of W where
                         the op shards M; at least the shape's M), each call passing the
                         shape's M: the implementation of its range of M runs (Operands::m)
  --tune                 pre-tune: make each shape's auto plan, which times its candidates and
                         keeps the choice in the tuning cache (TPGEMM_TUNE_CACHE), and print what
                         it chose; nothing else is timed or checked
  --rules                beside auto (tuned on plan creation), a row 'rules': auto from the
                         planner's rules alone (PlanOptions::tune off)
  --timing=sync|batch|graph
                         GEMM ops and --op gemm: sync (default): each call between two events,
                         waited for, as the torch peers are timed; batch: the calls back to back,
                         5 batches of --iterations, the median batch's mean; graph: the same
                         batches captured in a CUDA graph and replayed (the GPU's time alone, as
                         the planner times).
                         A shape's implementations are timed in alternation, one sample of each
                         per round in a fresh order, so that a drift of the GPU weighs on all of
                         them alike
  --dtype=bf16|fp16|e4m3|e5m2
                         A and B (default bf16); FP8 (e4m3, e5m2): the GEMM ops, with
                         --out-dtype, B as nk, each rank's scales drawn with its data
  --b-dtype=e4m3|e5m2    B's FP8 type where it differs from A's (an e5m2 gradient times e4m3
                         weights: --dtype=e5m2 --b-dtype=e4m3); never both e5m2
  --out-dtype=bf16|fp16|fp32
                         D (and C); fp32: the partial sums reduced in fp32 (default: --dtype);
                         implementations that cannot write it are skipped
  --scale=tensor|row|block
                         FP8 scales: one per operand (default), one per row of A and per
                         column of D (row-wise), or per 1x128 block of A and 128x128 block of
                         B (block: e4m3, K a multiple of 128); row and block: --l=1, run by
                         the baseline, pipelined_ce and the matmul-then-collective
                         implementations (the others are skipped)
  --b-layout=nk|kn       B as [N,K] (nn.Linear weight, default) or [K,N]
  --a-layout=mk|km       A as [M,K] (default) or [K,M] (stored transposed)
  --lda=PAD --ldb=PAD    A's and B's rows PAD elements longer than they are (a slice of a wider
                         tensor; a multiple of 16 bytes)
  --ldd=PAD              D's (and C's) rows PAD elements longer than they are (written into a
                         slice of a wider tensor; a multiple of 16 bytes in D's type)
  --batch-pad=PAD        with --l > 1: every operand's batch entries PAD elements further apart
                         than their rows make them (batch_stride_a.. d; a multiple of 16 bytes)
  --b-broadcast          one B for every batch entry of --l (B's batch stride 0; along M)
  --shard=m|n            the dimension ag_gemm gathers and gemm_rs scatters (default m; n: B's
                         columns gathered, D's columns scattered; rows named ag_gemm_n, gemm_rs_n)
  --alpha= --beta=       D = alpha * A B + beta * C (beta != 0 adds a random C)
  --iterations=N         timed runs per case (default 40): median per rank, max over ranks
  --warmup-iterations=N  untimed runs first (default 10)
  --check                compare every implementation with a reference GEMM on one GPU over
                         the same global data; exit 1 if any is off by more than --eps
  --eps=X                relative error allowed by --check (default 1e-2 bf16, 2e-3 fp16)
  --gpus=W               ranks to fork on this machine (default: all local GPUs)
  --chunks=N             pipelined: chunks per rank block (gemm_ar with C: rounds); 0 = planner's choice
  --comm-sms=N           SMs the matmuls leave to tpgemm's kernels beside them; -1 = planner's choice
  --matmul=M             pipelined_ce's matmuls: cublaslt, sm90 (tpgemm's Hopper GEMM core) or
                         auto (the planner's choice)
  --timeout-ms=N         bound on every wait for a peer (default: TPGEMM_TIMEOUT_MS or 5000)
  --json=FILE            write every result row (rank 0)
  --help
)";
}

BenchConfig parse_cli(const std::vector<std::string>& args) {
  BenchConfig c;
  std::string ops = "all", impls = "all";
  for (const auto& a : args) c.command_line += (c.command_line.empty() ? "" : " ") + a;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    if (flag.rfind("--", 0) != 0 && flag != "-h") throw Error(ErrorCode::kInvalidArgument, strfmt("'%s': expected a --flag", flag.c_str()));
    const size_t eq = flag.find('=');
    const std::string name = flag.substr(0, eq);
    const bool boolean = name == "--check" || name == "--rules" || name == "--tune" || name == "--b-broadcast" ||
                         name == "--help" || name == "-h";
    if (eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
    } else if (!boolean) {
      if (i + 1 >= args.size())
        throw Error(ErrorCode::kInvalidArgument, strfmt("%s: expected a value (or not a flag: see --help)", flag.c_str()));
      value = args[++i];
    }
    if (boolean && eq != std::string::npos)  // --check=false would read as --check
      throw bad(flag, value, "no value: it is a switch (leave it out to turn it off)");
    if (flag == "--help" || flag == "-h") c.help = true;
    else if (flag == "--check") c.check = true;
    else if (flag == "--rules") c.rules = true;
    else if (flag == "--b-broadcast") c.b_broadcast = true;
    else if (flag == "--tune") c.tune_only = true;
    else if (flag == "--op") ops = value;
    else if (flag == "--impl") impls = value;
    else if (flag == "--m") c.m = int_arg(flag, value, 1, int64_t(1) << 31);
    else if (flag == "--n") c.n = int_arg(flag, value, 1, int64_t(1) << 31);
    else if (flag == "--k") c.k = int_arg(flag, value, 1, int64_t(1) << 31);
    else if (flag == "--l") c.l = int_arg(flag, value, 1, 65535);
    else if (flag == "--bytes") {
      c.bytes = int_arg(flag, value, 16, int64_t(1) << 40);
      if (!valid_allreduce_bytes(c.bytes)) throw bad(flag, value, "a multiple of 16 bytes (the all-reduce moves 16-byte vectors)");
    }
    else if (flag == "--alpha") c.alpha = static_cast<float>(float_arg(flag, value));
    else if (flag == "--beta") c.beta = static_cast<float>(float_arg(flag, value));
    else if (flag == "--iterations") c.iterations = static_cast<int>(int_arg(flag, value, 1, 1000000));
    else if (flag == "--warmup-iterations") c.warmup_iterations = static_cast<int>(int_arg(flag, value, 0, 1000000));
    else if (flag == "--eps") {
      c.eps = float_arg(flag, value);
      if (c.eps <= 0) throw bad(flag, value, "a positive tolerance");
    } else if (flag == "--gpus") c.gpus = static_cast<int>(int_arg(flag, value, 1, 1024));
    else if (flag == "--chunks") c.chunks = static_cast<int>(int_arg(flag, value, 0, 64));
    else if (flag == "--comm-sms") c.comm_sms = static_cast<int>(int_arg(flag, value, -1, 1024));
    else if (flag == "--matmul") {
      const auto m = parse_matmul(value);
      if (!m) throw bad(flag, value, "cublaslt, sm90 or auto");
      c.matmul = *m;
    }
    else if (flag == "--timeout-ms") c.timeout_ms = int_arg(flag, value, 1, int64_t(1) << 40);
    else if (flag == "--shapes") c.shapes_file = value;
    else if (flag == "--timing") {
      if (value != "sync" && value != "batch" && value != "graph") throw bad(flag, value, "sync, batch or graph");
      c.timing = value == "sync" ? BenchConfig::Timing::kSync
                 : value == "batch" ? BenchConfig::Timing::kBatch : BenchConfig::Timing::kGraph;
    } else if (flag == "--plan-m") c.plan_m = int_arg(flag, value, 1, int64_t(1) << 31);
    else if (flag == "--random") c.random = static_cast<int>(int_arg(flag, value, 1, 100000));
    else if (flag == "--seed") c.seed = static_cast<uint64_t>(int_arg(flag, value, 1, int64_t(1) << 62));
    else if (flag == "--json") c.json = value;
    else if (flag == "--dtype") {
      const auto d = parse_dtype(value);
      if (!d || *d == DType::kFP32) throw bad(flag, value, "bf16, fp16, e4m3 or e5m2");
      c.dtype = *d;
    } else if (flag == "--b-dtype") {
      const auto d = parse_dtype(value);
      if (!d || !is_fp8(*d)) throw bad(flag, value, "e4m3 or e5m2");
      c.b_dtype = *d;
    } else if (flag == "--out-dtype") {
      const auto d = parse_dtype(value);
      if (!d) throw bad(flag, value, "bf16, fp16 or fp32");
      c.out_dtype = *d;
    } else if (flag == "--a-layout") {
      const auto a = parse_a_layout(value);
      if (!a) throw bad(flag, value, "mk or km");
      c.a_layout = *a;
    } else if (flag == "--lda" || flag == "--ldb" || flag == "--ldd" || flag == "--batch-pad") {
      (flag == "--lda" ? c.lda : flag == "--ldb" ? c.ldb : flag == "--ldd" ? c.ldd : c.batch_pad) =
          int_arg(flag, value, 0, int64_t(1) << 20);
    } else if (flag == "--scale") {
      const auto s = parse_scale_mode(value);
      if (!s) throw bad(flag, value, "tensor, row or block");
      c.scale_mode = *s;
    } else if (flag == "--shard") {
      const auto d = parse_shard_dim(value);
      if (!d) throw bad(flag, value, "m or n");
      c.shard_dim = *d;
    } else if (flag == "--b-layout") {
      const auto b = parse_b_layout(value);
      if (!b) throw bad(flag, value, "nk ([N,K] row-major) or kn ([K,N] row-major)");
      c.b_layout = *b;
    } else
      throw Error(ErrorCode::kInvalidArgument, strfmt("unknown flag %s (see --help)", flag.c_str()));
  }
  for (const auto& o : split(ops)) {
    if (o == "all") {
      c.ops = {Op::kAgGemm, Op::kGemmRs, Op::kGemmAr};
      c.allreduce = true;
    } else if (o == "allreduce") c.allreduce = true;
    else if (o == "gemm") c.gemm_core = true;
    else if (const auto op = parse_op(o)) c.ops.push_back(*op);
    else throw bad("--op", ops, "ag_gemm, gemm_rs, gemm_ar, allreduce, gemm or all");
  }
  for (const auto& s : split(impls)) {
    if (s == "all") {
      if (split(impls).size() > 1) throw bad("--impl", impls, "'all' alone, or a list of implementations without it");
      c.impls.clear();
      c.allreduce_impls.clear();
      break;
    }
    if (s == "ladder") {
      c.impls.insert(c.impls.end(), {Impl::kNaiveRemote, Impl::kThreadloadGather, Impl::kGatherThenGemm, Impl::kFused});
      continue;
    }
    const auto i = parse_impl(s);
    const auto r = s == "baseline" ? std::optional<AllReduceImpl>(AllReduceImpl::kNccl) : parse_allreduce_impl(s);
    if (!i && !r) throw bad("--impl", impls, "baseline, pipelined_ce, gemm_oneshot, gemm_twoshot, gemm_reducescatter, "
                                           "allgather_gemm, fused, naive_remote, threadload_gather, gather_then_gemm, "
                                           "ladder, nccl, oneshot, twoshot, auto or all");
    if (i) c.impls.push_back(*i);
    if (r) c.allreduce_impls.push_back(*r);
  }
  const std::string dt(to_string(c.dtype));
  if (c.b_dtype && !is_fp8(c.dtype))
    throw Error(ErrorCode::kInvalidArgument, strfmt("--b-dtype with --dtype=%s: B takes another type than A only as FP8; "
                                                    "expected --dtype e4m3 or e5m2", dt.c_str()));
  if (c.b_dtype && *c.b_dtype == c.dtype) c.b_dtype.reset();
  if (c.dtype == DType::kE5M2 && !c.b_dtype)
    throw Error(ErrorCode::kInvalidArgument, "--dtype=e5m2 needs --b-dtype=e4m3 (cuBLASLt's FP8 matmul has no e5m2 x e5m2)");
  if (is_fp8(c.dtype)) {
    if (!c.out_dtype || is_fp8(*c.out_dtype))
      throw Error(ErrorCode::kInvalidArgument, strfmt("--dtype=%s needs --out-dtype bf16, fp16 or fp32 (D is never FP8)",
                                                      dt.c_str()));
    if (c.b_layout != BLayout::kNK)
      throw Error(ErrorCode::kInvalidArgument, strfmt("--dtype=%s with --b-layout=kn: FP8 matmuls take B as nk", dt.c_str()));
    if (ops == "all") c.allreduce = false;  // (the all-reduce has no FP8)
    if (c.allreduce || c.gemm_core)
      throw Error(ErrorCode::kInvalidArgument, strfmt("--dtype=%s with --op=%s: FP8 runs the GEMM ops (ag_gemm, "
                                                      "gemm_rs, gemm_ar) only", dt.c_str(), ops.c_str()));
  }
  const std::string scale(to_string(c.scale_mode));
  if (c.scale_mode != ScaleMode::kTensor && !is_fp8(c.dtype))
    throw Error(ErrorCode::kInvalidArgument, strfmt("--scale=%s with --dtype other than e4m3 or e5m2: scales apply to "
                                                    "FP8 operands only", scale.c_str()));
  if (c.scale_mode != ScaleMode::kTensor && c.l != 1)
    throw Error(ErrorCode::kInvalidArgument, strfmt("--scale=%s with --l=%lld: %s scales take one batch entry; "
                                                    "expected --l=1", scale.c_str(), (long long)c.l,
                                                    c.scale_mode == ScaleMode::kRow ? "row-wise" : "block"));
  if (c.scale_mode == ScaleMode::kBlock && (c.dtype != DType::kE4M3 || c.b_dtype.value_or(c.dtype) != DType::kE4M3))
    throw Error(ErrorCode::kInvalidArgument,
                strfmt("--scale=block with --dtype=%s (B %s): block scales take e4m3 A and B",
                       std::string(to_string(c.dtype)).c_str(), std::string(to_string(c.b_dtype.value_or(c.dtype))).c_str()));
  if (!is_fp8(c.dtype) && c.out_dtype && *c.out_dtype != c.dtype && *c.out_dtype != DType::kFP32)
    throw Error(ErrorCode::kInvalidArgument,
                strfmt("--out-dtype=%s with --dtype=%s: expected %s or fp32", std::string(to_string(*c.out_dtype)).c_str(),
                       std::string(to_string(c.dtype)).c_str(), std::string(to_string(c.dtype)).c_str()));
  const int given = (c.m > 0) + (c.n > 0) + (c.k > 0);
  if (given != 0 && given != 3)
    throw Error(ErrorCode::kInvalidArgument, "--m, --n and --k go together: give all three for one shape, or none for the shape file");
  if (given == 3 && !c.shapes_file.empty())
    throw Error(ErrorCode::kInvalidArgument, "--shapes and --m/--n/--k both given: choose one");
  if (c.random > 0 && (given == 3 || !c.shapes_file.empty()))
    throw Error(ErrorCode::kInvalidArgument, "--random with --shapes or --m/--n/--k: choose one source of shapes");
  if (c.seed != 0 && c.random == 0)
    throw Error(ErrorCode::kInvalidArgument, strfmt("--seed %llu without --random: the seed is the random draw's",
                                                    (unsigned long long)c.seed));
  return c;
}

}  // namespace tpgemm::bench
