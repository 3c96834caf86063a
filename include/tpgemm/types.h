// Vocabulary shared by the API, the planner and the tools: ops, implementations, dtypes, layouts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpgemm {

// kFP32 is an output type only (GemmProblem::out_dtype). kE4M3 (FP8, e4m3fn) and kE5M2 (FP8,
// e5m2: the wider range of gradients) are input types only: A and B with their fp32 scales
// (Operands::a_scale, b_scale), D in bf16, fp16 or fp32. A and B may differ in FP8 type
// (GemmProblem::b_dtype), but not both be e5m2: cuBLASLt's FP8 matmul has no e5m2 x e5m2.
enum class DType : int { kBF16 = 0, kFP16 = 1, kFP32 = 2, kE4M3 = 3, kE5M2 = 4 };
constexpr bool is_fp8(DType t) { return t == DType::kE4M3 || t == DType::kE5M2; }

// How B is stored (always row-major, packed):
//   kKN: [K, N], as in D = A @ B.
//   kNK: [N, K], the nn.Linear weight (CUTLASS calls this "column-major B").
enum class BLayout : int { kKN = 0, kNK = 1 };

// How A is stored:
//   kMK: [M, K] row-major (default).
//   kKM: [K, M] row-major, A^T packed (cuBLAS's transposed A, in its column-major terms). bf16 and
//        fp16 only (cuBLASLt's FP8 matmul takes A as [M, K]); the baseline runs it.
enum class ALayout : int { kMK = 0, kKM = 1 };

// The three tensor-parallel GEMMs. In every op each rank multiplies an M x N x K GEMM:
//   kAgGemm  A_local [L, M/W, K] gathered along M; B [L, K, N];       D [L, M, N]
//   kGemmRs  A [L, M, K] (K is this rank's shard); B [L, K, N];       D [L, M/W, N] (sum over ranks, scattered along M)
//   kGemmAr  A [L, M, K] (K is this rank's shard); B [L, K, N];       D [L, M, N]   (sum over ranks, on every rank)
// C, when given, has D's shape and is added once: D = alpha * (...) + beta * C.
// With ShardDim::kN, ag_gemm and gemm_rs work along N instead (below).
enum class Op : int { kAgGemm = 0, kGemmRs = 1, kGemmAr = 2 };

// The dimension ag_gemm gathers and gemm_rs scatters (gemm_ar has none: kM only).
//   kM  as above. CUTLASS's AllGather1D_TilingCD_RotatingA and ReduceScatter1D_TilingA_RotatingC.
//   kN  ag_gemm: A [L, M, K] (this rank's rows, kept); B_local [L, K, N/W] (nk: [L, N/W, K]), this
//       rank's columns of B, gathered along N; D [L, M, N]. As when a weight sharded by columns is
//       gathered (CUTLASS's AllGather1D_TilingCD_RotatingB).
//       gemm_rs: A [L, M, K] and B [L, K, N] as above; D [L, M, N/W], the sum over ranks of this
//       rank's columns (CUTLASS's ReduceScatter1D_TilingB_RotatingC).
//       N must be a multiple of 8 x W (each rank's columns, 16-byte rows).
enum class ShardDim : int { kM = 0, kN = 1 };

// How FP8 operands are scaled (Operands::a_scale, b_scale, fp32 on the GPU):
//   kTensor  one value for all of this rank's A, one for all of its B.
//   kRow     one value per row of this rank's A (its M rows; M/W for ag_gemm along M) and one per
//            column of D that this rank's B makes (per row of the [N, K] weight: N; N/W for ag_gemm
//            along N): the per-token and per-channel scales of torch._scaled_mm's row-wise mode.
//            One batch entry (L = 1); the baseline, pipelined_ce along M and the matmul-then-
//            collective implementations of gemm_rs and gemm_ar run it.
//   kBlock   DeepSeek-V3's block scales (torch._scaled_mm's BlockWise1x128 for A and BlockWise128x128
//            for B; cuBLASLt's VEC128_32F and BLK128x128_32F). A: one value per row of this rank's A
//            per 128 columns of K, K block by K block, each block's values in row order: (row i,
//            K block kb) at kb x R + i, R = this rank's rows of A. B: one per 128 x 128 block of the
//            [N, K] weight, a row of K blocks per 128 rows of B: (nb, kb) at nb x S + kb, S = K/128
//            rounded up to a multiple of 4 (cuBLASLt's stride between them; the values past K/128
//            are not read). e4m3 A and B, K (this rank's) a multiple of 128, M a multiple of 4, L = 1;
//            the baseline runs it (ag_gemm gathers A's scales with its rows), gemm_rs's and
//            gemm_ar's matmul-then-collective implementations, and pipelined_ce along M in chunks
//            of multiples of 4 rows.
enum class ScaleMode : int { kTensor = 0, kRow = 1, kBlock = 2 };

enum class Impl : int {
  kAuto = 0,     // let the planner choose per shape (never slower than baseline by design)
  kBaseline,     // NCCL collective and cuBLASLt matmul back to back on the caller's stream
  kPipelinedCE,  // chunked matmuls (cuBLASLt or the Hopper core: Matmul) overlapped with copy-engine transfers
  kGemmOneShot,  // gemm_ar only: matmul, then tpgemm's one-shot all-reduce
  kGemmTwoShot,  // gemm_ar only: matmul, then tpgemm's two-shot all-reduce
  kFused,        // one persistent Hopper GEMM kernel (sm_90) with the communication inside its tiles.
                 // ag_gemm: it waits, piece of K by piece, for the rows of A the copy engines are
                 // still pulling. gemm_rs: it flags each finished tile, and each owner sums its
                 // rows' tiles beside it (M a multiple of 128 x W).
  // The ladder of the nvFuser study (ag_gemm only; docs/design.md): SM threads read peers' rows
  // over NVLink. Kept to measure fused against; slow by design, and never chosen by kAuto.
  kNaiveRemote,       // one thread per element of D, its row of A read from the owner each time
  kThreadloadGather,  // one kernel: thread-load gather, device semaphores, fp32 FMA tiles (no tensor cores)
  kGatherThenGemm,    // a thread-load gather kernel, then the Hopper GEMM core (sm_90)
  kGemmReduceScatter,  // gemm_rs only: matmul, then tpgemm's reduce-scatter kernel (two-shot's first shot)
  kAllGatherGemm,      // ag_gemm only (along M): tpgemm's all-gather kernel, then the matmul
};

// The matmuls of pipelined_ce's schedule (every other implementation has its own): cuBLASLt's, or
// tpgemm's Hopper GEMM core's (sm_90; bf16 and fp16 along M), whose epilogue loads C (the partial
// of NOTE [partial as C]) from a warp of its own beside the mainloop. kAuto: the planner's choice.
enum class Matmul : int { kAuto = 0, kCublasLt, kSm90 };

// The standalone all-reduce (the kernels GEMM+AllReduce builds on).
enum class AllReduceImpl : int { kAuto = 0, kNccl, kOneShot, kTwoShot };

std::string_view to_string(DType v);
std::string_view to_string(BLayout v);
std::string_view to_string(ALayout v);
std::string_view to_string(ShardDim v);
std::string_view to_string(ScaleMode v);
std::string_view to_string(Op v);
std::string_view to_string(Impl v);
std::string_view to_string(AllReduceImpl v);
std::string_view to_string(Matmul v);

// Parse the names to_string() prints (and a few aliases, e.g. "bfloat16", "pipelined").
std::optional<DType> parse_dtype(std::string_view s);
std::optional<BLayout> parse_b_layout(std::string_view s);
std::optional<ALayout> parse_a_layout(std::string_view s);
std::optional<ShardDim> parse_shard_dim(std::string_view s);
std::optional<ScaleMode> parse_scale_mode(std::string_view s);  // "tensor", "row" ("rowwise"), "block" ("blockwise")
std::optional<Op> parse_op(std::string_view s);
std::optional<Impl> parse_impl(std::string_view s);
std::optional<AllReduceImpl> parse_allreduce_impl(std::string_view s);
std::optional<Matmul> parse_matmul(std::string_view s);  // "auto", "cublaslt", "sm90"

size_t dtype_size(DType v);

// One tensor-parallel GEMM, identical on every rank. Tensors are row-major, packed unless the
// strides below say otherwise; the batch L is the outermost dimension of every operand.
struct GemmProblem {
  Op op = Op::kAgGemm;
  int64_t m = 0;  // global rows of D (before any scatter; this rank's rows for ag_gemm with kN)
  int64_t n = 0;  // columns of D (this rank's columns for ag_gemm along M; with kN always the global N)
  int64_t k = 0;  // inner dimension this rank multiplies (its shard for gemm_rs / gemm_ar)
  int64_t l = 1;  // batch count
  DType dtype = DType::kBF16;  // of A (and of B where b_dtype is unset): bf16, fp16, e4m3 or e5m2
                               // (FP8: B as kNK; docs/design.md says where it runs)
  // Of B; unset: dtype. Only beside an FP8 A, and FP8 itself: an e5m2 gradient times e4m3
  // weights or activations, and the reverse.
  std::optional<DType> b_dtype;
  // Of D and C; unset: dtype (FP8 needs one: bf16, fp16 or fp32). kFP32 keeps the fp32
  // accumulation in D, and the sums of gemm_rs and gemm_ar add fp32 partials (the baseline's; the
  // other implementations write D in dtype). Partial sums are never reduced in FP8.
  std::optional<DType> out_dtype;
  ScaleMode scale_mode = ScaleMode::kTensor;  // FP8 only
  BLayout b_layout = BLayout::kNK;
  ALayout a_layout = ALayout::kMK;
  // Row strides in elements, 0 for packed: lda of A as a_layout stores it (kMK: at least K; kKM: at
  // least this rank's rows of A), ldb of B as b_layout does (kNK: at least K; kKN: at least this
  // rank's columns of B). Each a multiple of 16 bytes. A slice of a larger tensor passes without a
  // copy. The baseline takes them, pipelined_ce along M, and the matmul-then-collective
  // implementations of gemm_rs and gemm_ar (docs/design.md).
  int64_t lda = 0, ldb = 0;
  // Row strides of C and D in elements, 0 for packed: at least this rank's columns of D, each a
  // multiple of 16 bytes in D's type. D written into a slice of a wider tensor (and C read from
  // one), what lies between the rows untouched. The baseline and pipelined_ce along M take them.
  int64_t ldc = 0, ldd = 0;
  // Elements between batch entries (L > 1) of A, B, C and D as this rank passes them; 0: an entry's
  // stored rows times their row stride (packed entries of strided rows, as a slice [L, M, :K] of a
  // wider [L, M, K'] tensor has). Otherwise at least one entry's extent ((rows - 1) x ld + row) and
  // a multiple of 16 bytes; entries of D never overlap, and what lies between them is untouched.
  // With L = 1 they are not read. Given, a stride is kept by calls of fewer rows (Operands::m) and
  // the operand counts as strided even where it equals the packed stride. Taken where the row
  // strides are (D's and C's: where ldc and ldd are). D's extent, first element to last, may not
  // overlap another operand's, even where their entries interleave without touching.
  int64_t batch_stride_a = 0, batch_stride_b = 0, batch_stride_c = 0, batch_stride_d = 0;
  // L > 1: one B for every batch entry (B's batch stride 0; B is [K, N] or [N, K], not L of them),
  // as a weight shared by a batch of activations. Along M (shard_dim m) only. The baseline,
  // pipelined_ce and the matmul-then-collective implementations take it.
  bool b_broadcast = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  bool has_c = false;
  ShardDim shard_dim = ShardDim::kM;  // ag_gemm / gemm_rs: the dimension gathered or scattered
};

std::string describe(const GemmProblem& p);  // "ag_gemm M=4096 N=8192 K=8192 L=1 bf16 B=nk" (+ " shard=n")

// The type of D and C: out_dtype where given, else dtype.
inline DType d_dtype(const GemmProblem& p) { return p.out_dtype.value_or(p.dtype); }
// The type of B: b_dtype where given, else dtype.
inline DType b_dtype(const GemmProblem& p) { return p.b_dtype.value_or(p.dtype); }

// Device pointers of one call. `c` is read only when the problem has_c.
struct Operands {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* c = nullptr;
  void* d = nullptr;
  // ag_gemm along M with PlanOptions::return_gathered_a: receives the gathered A [L, M, K] (the
  // input of the matmul, e.g. for a weight gradient later); must not overlap the other operands.
  // e4m3: the rows as each rank sent them, so each block is in its rank's a_scale (one value
  // where the ranks share a tensor-wise scale, as torch's scaled ops assume).
  void* a_gathered = nullptr;
  // Rows of this call, M in the op's terms above (0: the plan's M): at least 1, at most the plan's
  // M, a multiple of W where the op shards M; the same on every rank. The operand sizes follow it
  // (operand_sizes of the problem with this M). A call below the plan's M runs an implementation
  // made for a range of M (Plan::prepare), the one the planner chose for that range.
  int64_t m = 0;
  // dtype e4m3 (and only then): device pointers, 16-byte aligned, to the dequantisation scales
  // of this rank's A and B as GemmProblem::scale_mode lays them out (kTensor: one fp32 each; kRow:
  // one per row of A, one per column of D from B; kBlock: per 1 x 128 block of A and 128 x 128 block
  // of B, operand_sizes() counts them). A's values are its scale x its e4m3 elements:
  // D = alpha x (a_scale A)(b_scale B) + beta x C. Ranks' scales may differ: ag_gemm gathers them
  // with the shards.
  const float* a_scale = nullptr;
  const float* b_scale = nullptr;
};

struct PlanOptions {
  Impl impl = Impl::kAuto;
  // pipelined_ce: chunks per rank block (gemm_ar with C: rounds; along N only 0 or 1: whole
  // column blocks; gemm_rs and gemm_ar without C, 2 or more: each block's sum passes around the
  // ring of ranks, each adding its partial in a matmul's epilogue, with no reduction after);
  // fused: pieces of K per peer block (at most ceil(K / 64)); the ladder ignores it. 0 = the
  // planner's choice.
  int chunks_per_rank = 0;
  // SMs the matmuls leave free for tpgemm's kernels beside them: the small synchronisation
  // kernels (pipelined_ce, fused ag_gemm), or the push-and-reduce kernel of the fused gemm_rs
  // and gemm_ar (0 there: it runs only after the GEMM). -1 = the planner's choice.
  int comm_sms = -1;
  // pipelined_ce's matmuls (Matmul above); kAuto: the planner's choice, which the tuner times
  // both ways where the Hopper core serves the problem. Any other value with impl neither auto
  // nor pipelined_ce is an InvalidArgument; Plan::options() reports kAuto for those.
  Matmul matmul = Matmul::kAuto;
  // ag_gemm along M: every run() also writes the gathered A to Operands::a_gathered. The
  // implementations that gather into their own buffer copy it out after the matmul (one pass over
  // M x K); baseline and allgather_gemm gather straight into it. The ladder's refuse it.
  bool return_gathered_a = false;
  // impl = auto: time the candidates on Plan creation (NOTE [measured planner], ops/tuner.h), or
  // take the rules of plan/choose.cpp. kDefault: TPGEMM_TUNE ("0" off, else on).
  enum class Tune : int { kDefault = 0, kOn, kOff };
  Tune tune = Tune::kDefault;
  // The same operands give the same bits of D, call after call and plan after plan: every sum of
  // partial products runs in an order fixed by the schedule (docs/design.md, "Determinism"). The
  // baseline's gemm_rs and gemm_ar sum in NCCL, which fixes no order: with this set they refuse
  // (Unsupported), and auto chooses among the others; a problem only the baseline serves is
  // Unsupported. ag_gemm has no sum and is unaffected.
  bool deterministic = false;
};

// How a plan's implementation was chosen (Plan::selection()).
struct PlanSelection {
  enum class Source : int {
    kAsked,     // PlanOptions::impl named it
    kTuned,     // timed against the other candidates on this team (NOTE [measured planner])
    kCached,    // a tuning cache's entry (plan/tune_cache.h)
    kFallback,  // the rules of plan/choose.cpp: tuning off, or impossible
  };
  Source source = Source::kAsked;
  std::string detail;     // tuned: every candidate's time (ms, slowest rank); else where it came from
  double tuning_ms = 0;   // wall time this rank spent tuning
};
std::string_view to_string(PlanSelection::Source v);

}  // namespace tpgemm
