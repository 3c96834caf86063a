#include "tpgemm/types.h"

#include <array>
#include <utility>

#include "core/format.h"

namespace tpgemm {
namespace {

template <typename E, size_t N>
std::optional<E> lookup(const std::array<std::pair<std::string_view, E>, N>& table, std::string_view s) {
  for (const auto& [name, value] : table)
    if (name == s) return value;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(DType v) {
  switch (v) {
    case DType::kBF16: return "bf16";
    case DType::kFP16: return "fp16";
    case DType::kFP32: return "fp32";
    case DType::kE4M3: return "e4m3";
    case DType::kE5M2: return "e5m2";
  }
  return "?";
}
std::string_view to_string(BLayout v) { return v == BLayout::kKN ? "kn" : v == BLayout::kNK ? "nk" : "?"; }
std::string_view to_string(ALayout v) { return v == ALayout::kMK ? "mk" : v == ALayout::kKM ? "km" : "?"; }

std::string_view to_string(ShardDim v) { return v == ShardDim::kM ? "m" : v == ShardDim::kN ? "n" : "?"; }

std::string_view to_string(ScaleMode v) {
  return v == ScaleMode::kTensor ? "tensor" : v == ScaleMode::kRow ? "row" : v == ScaleMode::kBlock ? "block" : "?";
}

std::string_view to_string(Op v) {
  switch (v) {
    case Op::kAgGemm: return "ag_gemm";
    case Op::kGemmRs: return "gemm_rs";
    case Op::kGemmAr: return "gemm_ar";
  }
  return "?";
}

std::string_view to_string(Impl v) {
  switch (v) {
    case Impl::kAuto: return "auto";
    case Impl::kBaseline: return "baseline";
    case Impl::kPipelinedCE: return "pipelined_ce";
    case Impl::kGemmOneShot: return "gemm_oneshot";
    case Impl::kGemmTwoShot: return "gemm_twoshot";
    case Impl::kFused: return "fused";
    case Impl::kNaiveRemote: return "naive_remote";
    case Impl::kThreadloadGather: return "threadload_gather";
    case Impl::kGatherThenGemm: return "gather_then_gemm";
    case Impl::kGemmReduceScatter: return "gemm_reducescatter";
    case Impl::kAllGatherGemm: return "allgather_gemm";
  }
  return "?";
}

std::string_view to_string(AllReduceImpl v) {
  switch (v) {
    case AllReduceImpl::kAuto: return "auto";
    case AllReduceImpl::kNccl: return "nccl";
    case AllReduceImpl::kOneShot: return "oneshot";
    case AllReduceImpl::kTwoShot: return "twoshot";
  }
  return "?";
}

std::string_view to_string(Matmul v) {
  switch (v) {
    case Matmul::kAuto: return "auto";
    case Matmul::kCublasLt: return "cublaslt";
    case Matmul::kSm90: return "sm90";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, DType>, 10> t{{{"bf16", DType::kBF16},
                                                                        {"bfloat16", DType::kBF16},
                                                                        {"fp16", DType::kFP16},
                                                                        {"float16", DType::kFP16},
                                                                        {"fp32", DType::kFP32},
                                                                        {"float32", DType::kFP32},
                                                                        {"e4m3", DType::kE4M3},
                                                                        {"float8_e4m3fn", DType::kE4M3},
                                                                        {"e5m2", DType::kE5M2},
                                                                        {"float8_e5m2", DType::kE5M2}}};
  return lookup(t, s);
}

std::optional<ALayout> parse_a_layout(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, ALayout>, 2> t{{{"mk", ALayout::kMK}, {"km", ALayout::kKM}}};
  return lookup(t, s);
}

std::optional<BLayout> parse_b_layout(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, BLayout>, 2> t{{{"kn", BLayout::kKN}, {"nk", BLayout::kNK}}};
  return lookup(t, s);
}

std::optional<ShardDim> parse_shard_dim(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, ShardDim>, 2> t{{{"m", ShardDim::kM}, {"n", ShardDim::kN}}};
  return lookup(t, s);
}

std::optional<ScaleMode> parse_scale_mode(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, ScaleMode>, 5> t{
      {{"tensor", ScaleMode::kTensor}, {"row", ScaleMode::kRow}, {"rowwise", ScaleMode::kRow},
       {"block", ScaleMode::kBlock}, {"blockwise", ScaleMode::kBlock}}};
  return lookup(t, s);
}

std::optional<Op> parse_op(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, Op>, 6> t{{{"ag_gemm", Op::kAgGemm},
                                                                     {"ag", Op::kAgGemm},
                                                                     {"gemm_rs", Op::kGemmRs},
                                                                     {"rs", Op::kGemmRs},
                                                                     {"gemm_ar", Op::kGemmAr},
                                                                     {"ar", Op::kGemmAr}}};
  return lookup(t, s);
}

std::optional<Impl> parse_impl(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, Impl>, 12> t{{{"auto", Impl::kAuto},
                                                                       {"baseline", Impl::kBaseline},
                                                                       {"pipelined_ce", Impl::kPipelinedCE},
                                                                       {"pipelined", Impl::kPipelinedCE},
                                                                       {"gemm_oneshot", Impl::kGemmOneShot},
                                                                       {"gemm_twoshot", Impl::kGemmTwoShot},
                                                                       {"gemm_reducescatter", Impl::kGemmReduceScatter},
                                                                       {"allgather_gemm", Impl::kAllGatherGemm},
                                                                       {"fused", Impl::kFused},
                                                                       {"naive_remote", Impl::kNaiveRemote},
                                                                       {"threadload_gather", Impl::kThreadloadGather},
                                                                       {"gather_then_gemm", Impl::kGatherThenGemm}}};
  return lookup(t, s);
}

std::optional<AllReduceImpl> parse_allreduce_impl(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, AllReduceImpl>, 4> t{{{"auto", AllReduceImpl::kAuto},
                                                                                {"nccl", AllReduceImpl::kNccl},
                                                                                {"oneshot", AllReduceImpl::kOneShot},
                                                                                {"twoshot", AllReduceImpl::kTwoShot}}};
  return lookup(t, s);
}

std::optional<Matmul> parse_matmul(std::string_view s) {
  static constexpr std::array<std::pair<std::string_view, Matmul>, 3> t{
      {{"auto", Matmul::kAuto}, {"cublaslt", Matmul::kCublasLt}, {"sm90", Matmul::kSm90}}};
  return lookup(t, s);
}

size_t dtype_size(DType v) { return v == DType::kFP32 ? 4 : is_fp8(v) ? 1 : 2; }

std::string describe(const GemmProblem& p) {
  std::string s = strfmt("%s M=%lld N=%lld K=%lld L=%lld %s B=%s", std::string(to_string(p.op)).c_str(),
                         (long long)p.m, (long long)p.n, (long long)p.k, (long long)p.l,
                         std::string(to_string(p.dtype)).c_str(), std::string(to_string(p.b_layout)).c_str());
  if (p.alpha != 1.0f || p.beta != 0.0f || p.has_c) s += strfmt(" alpha=%g beta=%g%s", p.alpha, p.beta, p.has_c ? " +C" : "");
  if (p.shard_dim != ShardDim::kM) s += strfmt(" shard=%s", std::string(to_string(p.shard_dim)).c_str());
  if (b_dtype(p) != p.dtype) s += strfmt(" b=%s", std::string(to_string(b_dtype(p))).c_str());
  if (d_dtype(p) != p.dtype) s += strfmt(" out=%s", std::string(to_string(d_dtype(p))).c_str());
  if (p.scale_mode != ScaleMode::kTensor) s += strfmt(" scale=%s", std::string(to_string(p.scale_mode)).c_str());
  if (p.a_layout != ALayout::kMK) s += strfmt(" A=%s", std::string(to_string(p.a_layout)).c_str());
  if (p.lda != 0) s += strfmt(" lda=%lld", (long long)p.lda);
  if (p.ldb != 0) s += strfmt(" ldb=%lld", (long long)p.ldb);
  if (p.ldc != 0) s += strfmt(" ldc=%lld", (long long)p.ldc);
  if (p.ldd != 0) s += strfmt(" ldd=%lld", (long long)p.ldd);
  const struct { const char* name; int64_t v; } batch_strides[] = {
      {"a", p.batch_stride_a}, {"b", p.batch_stride_b}, {"c", p.batch_stride_c}, {"d", p.batch_stride_d}};
  for (const auto& b : batch_strides)
    if (b.v != 0) s += strfmt(" batch_stride_%s=%lld", b.name, (long long)b.v);
  if (p.b_broadcast) s += " b_broadcast";
  return s;
}

std::string_view to_string(PlanSelection::Source v) {
  switch (v) {
    case PlanSelection::Source::kAsked: return "asked";
    case PlanSelection::Source::kTuned: return "tuned";
    case PlanSelection::Source::kCached: return "cached";
    case PlanSelection::Source::kFallback: return "fallback";
  }
  return "?";
}

}  // namespace tpgemm
