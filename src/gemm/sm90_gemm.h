// tpgemm's own Hopper GEMM core: CUTLASS 3.x kernels (TMA, wgmma, warp-specialized persistent
// mainloops), planned once from a MatmulShape and run many times, like LtMatmul. Row-major:
// D[m, n] = alpha * A[m, k] * op(B) + beta * C[m, n], fp32 accumulation, D in the input type.
// Configurations and the rule choosing one: gemm/sm90_config.h, docs/design.md.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "gemm/lt_matmul.h"
#include "gemm/sm90/kernels.h"
#include "tpgemm/error.h"

namespace tpgemm::gemm {

class Sm90Gemm {
 public:
  // Whether the core can run `shape` (dtype, layout, alignment, sizes); if not, says why.
  static bool supports(const MatmulShape& shape, std::string* why);
  // Ok on a Hopper GPU (sm_90: the core's kernels are sm_90a code), else Unsupported saying so.
  // Plans that build on the core check it before their collective allocations.
  static Status device_supported(int device);

  Sm90Gemm() = default;
  // On the current device. `config_name`: a name from sm90::configs(), or "rule" (the rule of
  // sm90_config.cpp); empty: the environment variable TPGEMM_SM90_CONFIG if set (for calibration),
  // else the configuration measured fastest for the shape on this GPU (NOTE [measured core
  // config], gemm/sm90_measured.h; the rule with TPGEMM_TUNE=0). TPGEMM_SM90_SWIZZLE
  // (1, 2, 4, 8) sets the tile scheduler's swizzle, TPGEMM_SM90_RASTER its order (0 CUTLASS's
  // heuristic, 1 along M, 2 along N). Throws Error(Unsupported / InvalidArgument).
  // `measure` false: an empty name means TPGEMM_SM90_CONFIG if set, else the rule.
  explicit Sm90Gemm(const MatmulShape& shape, std::string_view config_name = {}, bool measure = true);
  // The fused AllGather+GEMM's kernel (NOTE [chunk wait] in gemm/sm90/kernels.h): A's rows
  // arrive while it runs, as `wait` describes; configuration coop_128x256_c2x1, rastered along
  // N from this rank's own rows. `wait` is fixed for the plan's life (its flags are the plan's).
  Sm90Gemm(const MatmulShape& shape, const sm90::ChunkWait& wait);
  // The fused GEMM+ReduceScatter's kernel: tile rows served in `order` (NOTE [tile order]), each
  // tile's flag raised once its stores are done (NOTE [tile signal]); configuration
  // coop_128x256_c2x1, rastered along N, no swizzle (tile rows are met in order).
  Sm90Gemm(const MatmulShape& shape, const sm90::TileRowOrder& order, const sm90::TileSignal& signal);

  // The workspace run() needs (stream-K's partial sums; 0 for the others).
  size_t workspace_bytes() const { return workspace_bytes_; }
  const char* config() const;  // the configuration's name
  const MatmulShape& shape() const { return shape_; }

  // Enqueues D = alpha * A * op(B) + beta * C (C may be null without has_c, and may be D).
  // Operands 16-byte aligned; `workspace` holds workspace_bytes() and is not used concurrently.
  // `own_a`: the fused AllGather+GEMM's kernel with wait.own_in_place reads this rank's block of A
  // from it (NOTE [own rows in place]); null for every other kernel.
  void run(const void* a, const void* b, const void* c, void* d, float alpha, float beta, void* workspace,
           cudaStream_t stream, const void* own_a = nullptr) const;

 private:
  void set_up(const MatmulShape& s);  // shape_ and the arguments every kernel shares
  // set_up, and one of the fused kernels (coop_128x256_c2x1 extended), rastered along N.
  void set_up_fused(const MatmulShape& s, const sm90::KernelTable& table, const char* variant);
  void finish();                      // once kernel_ and its arguments are set

  MatmulShape shape_{};
  int config_ = -1;
  const sm90::KernelFns* kernel_ = nullptr;
  sm90::Args base_{};  // shape, strides and hardware; pointers and scalars are set per call
  size_t workspace_bytes_ = 0;
  const char* variant_ = nullptr;  // a fused kernel's name, else null
};

}  // namespace tpgemm::gemm
