#include "plan/supported.h"

#include <string>

#include "core/format.h"
#include "plan/problem.h"
#include "plan/schedule.h"  // pipelined_pieces_fit

namespace tpgemm::plan {

Status gathered_a_supported(const GemmProblem& p, Impl impl) {
  if (p.op != Op::kAgGemm || p.shard_dim != ShardDim::kM)
    return invalid(strfmt("return_gathered_a with %s%s: only ag_gemm along M gathers A",
                          std::string(to_string(p.op)).c_str(), p.shard_dim == ShardDim::kN ? " (shard_dim=n)" : ""));
  if (p.a_layout != ALayout::kMK)
    return unsupported("return_gathered_a with a_layout=km: the gathered A is rows of [M, K]; expected a_layout=mk");
  switch (impl) {
    case Impl::kAuto:
    case Impl::kBaseline:
    case Impl::kPipelinedCE:
    case Impl::kFused:
    case Impl::kAllGatherGemm: return Status::Ok();
    default:
      return unsupported(strfmt("impl %s does not return the gathered A; use auto, baseline, pipelined_ce, fused or "
                                "allgather_gemm",
                                std::string(to_string(impl)).c_str()));
  }
}

Status impl_supported(const GemmProblem& p, Impl impl, const Topology& topo) {
  const std::string name(to_string(impl)), op(to_string(p.op));
  if (name == "?") return unsupported(strfmt("impl %d: unknown implementation", static_cast<int>(impl)));
  // The types first, whatever the shape. FP8 A and B: the implementations whose matmuls are
  // cuBLASLt's and whose communication moves D (gemm_rs and gemm_ar, along M) take them into a
  // 16-bit D with tensor-wise scales; ag_gemm's gather must carry every rank's scale, which the
  // baseline and pipelined_ce along M do (NOTE [gathered scales]); row-wise and block scales follow
  // the rows through the baseline's collectives and pipelined_ce's chunks along M (gemm_rs and
  // gemm_ar move no scales: the matmul-then-collective ones take both).
  // pipelined_ce's ag_gemm along M writes D by matmuls alone, so it takes any output type.
  if (is_fp8(p.dtype) && !topo.fp8)
    return unsupported(strfmt("dtype %s needs FP8 tensor cores (compute capability 8.9 or newer), and not every rank's GPU "
                              "has them; expected bf16 or fp16",
                              std::string(to_string(p.dtype)).c_str()));
  if (is_fp8(p.dtype) && p.scale_mode == ScaleMode::kBlock && !topo.all_sm90)  // NOTE [block scales through cuBLASLt]
    return unsupported("scale_mode=block: cuBLASLt's block-scaled FP8 matmul runs on Hopper (compute capability 9.0) "
                       "only, and not every rank's GPU is one; expected scale_mode=tensor or row");
  // pipelined_ce along M reads and writes the caller's rows at their strides (copies of A's rows
  // as 2D copies; ag_gemm's A stored [K, M] gathered as [K, M], blocks of its columns), and
  // multiplies blocks of rows with their row-wise scales (NOTE [gathered scales]). The matmul-then-collective
  // implementations of gemm_rs and gemm_ar read A and B in place with one matmul over all of A
  // (per rank block along N), so with every scale mode, and write D packed.
  const bool pipelined_m = impl == Impl::kPipelinedCE && p.shard_dim == ShardDim::kM;
  const bool matmul_first = impl == Impl::kGemmReduceScatter || impl == Impl::kGemmOneShot || impl == Impl::kGemmTwoShot;
  const bool strides_taken = impl == Impl::kAuto || impl == Impl::kBaseline ||
                             pipelined_m;
  if (!packed_operands(p, topo.world) && !strides_taken && !matmul_first)
    return unsupported(strfmt("impl %s takes A and B packed (a_layout=mk; lda, ldb and their batch strides 0), and "
                              "this problem has a_layout=%s lda=%lld ldb=%lld batch_stride_a=%lld batch_stride_b=%lld "
                              "(L=%lld); use impl=baseline or auto (pipelined_ce takes them along M; so do "
                              "gemm_reducescatter, gemm_oneshot and gemm_twoshot)",
                              name.c_str(), std::string(to_string(p.a_layout)).c_str(), (long long)p.lda,
                              (long long)p.ldb, (long long)p.batch_stride_a, (long long)p.batch_stride_b,
                              (long long)p.l));
  if (!packed_output(p, topo.world) && !strides_taken)
    return unsupported(strfmt("impl %s writes D packed (ldc, ldd and their batch strides 0), and this problem has "
                              "ldc=%lld ldd=%lld batch_stride_c=%lld batch_stride_d=%lld (L=%lld); use impl=baseline "
                              "or auto (pipelined_ce takes them along M)",
                              name.c_str(), (long long)p.ldc, (long long)p.ldd, (long long)p.batch_stride_c,
                              (long long)p.batch_stride_d, (long long)p.l));
  // One B for the whole batch: the implementations whose matmuls are cuBLASLt's, with B's batch
  // stride 0.
  if (p.b_broadcast && p.l > 1 && impl != Impl::kAuto && impl != Impl::kBaseline && !pipelined_m && !matmul_first)
    return unsupported(strfmt("impl %s takes one B per batch entry, and this problem has b_broadcast with L=%lld; use "
                              "impl=baseline, pipelined_ce, gemm_reducescatter, gemm_oneshot, gemm_twoshot or auto",
                              name.c_str(), (long long)p.l));
  const bool scales_taken = impl == Impl::kAuto || impl == Impl::kBaseline || matmul_first || pipelined_m;
  if (p.scale_mode != ScaleMode::kTensor && !scales_taken)
    return unsupported(strfmt("impl %s does not take scale_mode=%s (row-wise and block FP8 scales run in the "
                              "baseline, gemm_reducescatter, gemm_oneshot, gemm_twoshot and pipelined_ce along M); use "
                              "impl=baseline or auto",
                              name.c_str(), std::string(to_string(p.scale_mode)).c_str()));
  const bool moves_products = impl == Impl::kPipelinedCE || impl == Impl::kGemmReduceScatter ||
                              impl == Impl::kGemmOneShot || impl == Impl::kGemmTwoShot;
  const bool fp8_products = is_fp8(p.dtype) && (p.op == Op::kGemmRs || p.op == Op::kGemmAr) &&
                            p.shard_dim == ShardDim::kM && d_dtype(p) != DType::kFP32 && moves_products;
  const bool gathers_a = p.op == Op::kAgGemm && p.shard_dim == ShardDim::kM && impl == Impl::kPipelinedCE;
  if (is_fp8(p.dtype) && impl != Impl::kAuto && impl != Impl::kBaseline && !fp8_products && !gathers_a) {
    if (!moves_products)
      return unsupported(strfmt("impl %s takes bf16 or fp16 A and B, and dtype=%s (FP8 runs in the baseline, for "
                                "ag_gemm along M also in pipelined_ce, and for gemm_rs and gemm_ar along M into a bf16 "
                                "or fp16 D also in pipelined_ce, gemm_reducescatter, gemm_oneshot and gemm_twoshot); "
                                "use impl=baseline or auto",
                                name.c_str(), std::string(to_string(p.dtype)).c_str()));
    const std::string why = p.shard_dim != ShardDim::kM ? std::string("shard_dim=n")
                            : p.op == Op::kAgGemm      ? std::string("ag_gemm (its gather must carry every rank's scale)")
                                                       : std::string("out_dtype=fp32");
    return unsupported(strfmt("impl %s takes dtype=%s only for gemm_rs and gemm_ar along M into a bf16 or fp16 D "
                              "(pipelined_ce: ag_gemm along M too), and this is %s; use impl=baseline or auto",
                              name.c_str(), std::string(to_string(p.dtype)).c_str(), why.c_str()));
  }
  if (d_dtype(p) != p.dtype && impl != Impl::kAuto && impl != Impl::kBaseline && !fp8_products && !gathers_a)
    return unsupported(strfmt("impl %s writes D in the input type (%s), and out_dtype=%s; use impl=baseline or auto",
                              name.c_str(), std::string(to_string(p.dtype)).c_str(),
                              std::string(to_string(d_dtype(p))).c_str()));
  if (p.shard_dim == ShardDim::kN && impl != Impl::kAuto && impl != Impl::kBaseline && impl != Impl::kPipelinedCE &&
      impl != Impl::kGemmReduceScatter)
    return unsupported(strfmt("impl %s works along M only, and this %s has shard_dim=n; use impl=pipelined_ce or "
                              "baseline",
                              name.c_str(), op.c_str()));
  if (impl != Impl::kAuto && impl != Impl::kBaseline && topo.world > kMaxSymmetricWorld)
    return unsupported(strfmt("impl %s supports teams of up to %d ranks, and this one has %d; use impl=baseline",
                              name.c_str(), kMaxSymmetricWorld, topo.world));
  switch (impl) {
    case Impl::kAuto:
    case Impl::kBaseline: return Status::Ok();
    case Impl::kPipelinedCE:
      // Its schedule gives every rank a block of rows to reduce (or gather, or own).
      if (p.m < topo.world)
        return unsupported(strfmt("impl pipelined_ce needs at least one row per rank, and M=%lld at W=%d; use "
                                  "impl=auto",
                                  (long long)p.m, topo.world));
      // Its matmuls take blocks of whole rank blocks at least (NOTE [gathered scales]).
      if (is_fp8(p.dtype) && p.scale_mode == ScaleMode::kBlock && p.shard_dim == ShardDim::kM &&
          !pipelined_pieces_fit(p, topo.world, 1, 4))
        return unsupported(strfmt("impl pipelined_ce with scale_mode=block multiplies each rank block of M=%lld at W=%d "
                                  "in one matmul, and cuBLASLt's block-scaled matmul takes multiples of 4 rows; expected "
                                  "M/W rows per rank a multiple of 4 (gemm_ar: M a multiple of 4 x W), or impl=auto",
                                  (long long)p.m, topo.world));
      break;
    case Impl::kGemmOneShot:
    case Impl::kGemmTwoShot:
    case Impl::kGemmReduceScatter:
    case Impl::kAllGatherGemm: {
      const Op for_op = impl == Impl::kGemmReduceScatter ? Op::kGemmRs : impl == Impl::kAllGatherGemm ? Op::kAgGemm : Op::kGemmAr;
      if (p.op != for_op)
        return unsupported(strfmt("impl %s exists for %s only, not %s", name.c_str(), std::string(to_string(for_op)).c_str(),
                                  op.c_str()));
      break;
    }
    case Impl::kFused:
    case Impl::kNaiveRemote:
    case Impl::kThreadloadGather:
    case Impl::kGatherThenGemm:
      if (impl == Impl::kFused && p.op != Op::kAgGemm) {
        // gemm_rs's reduction takes whole 128-row tiles of the GEMM per rank (NOTE [tile reduce]);
        // gemm_ar's owners take tile rows in turn, any M (NOTE [tile all-reduce]).
        if (p.op == Op::kGemmRs && topo.world > 1 && p.m % (128 * static_cast<int64_t>(topo.world)) != 0)
          return unsupported(strfmt("impl fused for gemm_rs needs M to be a multiple of 128 x W = %lld (whole 128-row "
                                    "tiles per rank), and M=%lld; use impl=pipelined_ce",
                                    128 * static_cast<long long>(topo.world), (long long)p.m));
      } else if (p.op != Op::kAgGemm) {
        return unsupported(strfmt("impl %s exists for ag_gemm only, not %s", name.c_str(), op.c_str()));
      }
      if ((impl == Impl::kFused || impl == Impl::kGatherThenGemm) && !topo.all_sm90)
        return unsupported(strfmt("impl %s runs kernels built for sm_90 only (tpgemm's Hopper GEMM core, or "
                                  "gemm_ar's decode kernel), and this team's GPUs are not all sm_90; use "
                                  "impl=pipelined_ce",
                                  name.c_str()));
      // The GEMM core's own limits (gemm/sm90_config.h): TMA rows of 16 bytes, 32-bit extents.
      if ((impl == Impl::kFused || impl == Impl::kGatherThenGemm) &&
          (p.n % 8 != 0 || p.k % 8 != 0 || p.m > INT32_MAX || p.n > INT32_MAX || p.k > INT32_MAX || p.l > INT32_MAX))
        return unsupported(strfmt("impl %s needs N and K multiples of 8 and M, N, K, L below 2^31 (got N=%lld "
                                  "K=%lld); use impl=pipelined_ce",
                                  name.c_str(), (long long)p.n, (long long)p.k));
      break;
  }
  if (topo.world > 1 && !topo.all_lsa_peers)
    return unsupported(strfmt("impl %s needs every rank to be an NVLink load/store (LSA) peer with P2P access, "
                              "and this team of %d ranks is not; use impl=baseline",
                              name.c_str(), topo.world));
  return Status::Ok();
}

}  // namespace tpgemm::plan
