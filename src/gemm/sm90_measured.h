// The GEMM core's configuration for a shape, timed on this GPU (NOTE [measured core config]).
#pragma once

#include "gemm/lt_matmul.h"

namespace tpgemm::gemm {

// NOTE [measured core config]
// An Sm90Gemm made without a configuration named runs the one that ran its shape fastest on this
// GPU. The rule of sm90_config.cpp estimates each configuration's time from constants calibrated
// on H200; on H100 it picked pingpong_128x128_c1x2 on short-K shapes where that ran at 0.84-0.91x
// of cuBLASLt's speed and the cooperative kernels at 0.93-0.97x (docs/perf.md, "The GEMM core").
// So each configuration that can run the shape is timed on random operands of the shape, on a
// stream of its own, in five rounds (each configuration in turn, a CUDA graph of at least two
// calls lasting about 2 ms: the GPU's time, not the host's), the median round kept; the fastest wins, and the rule's
// choice keeps a tie within 1%. The choice is kept for the process, by device and the whole
// MatmulShape (dimensions, types, layouts, C, strides, SM count): the first plan of a shape pays
// for it (its operands' allocation and some 10 ms of calls per configuration), later ones reuse it. The rule decides where tuning
// is off (TPGEMM_TUNE=0; the plans of PlanOptions::tune = kOff and of deterministic ones ask for
// it too, so that every process runs the same configuration: stream-K sums a tile's K range in
// pieces, not bit for bit as the others do) and, without being kept, where the timing cannot run
// (its operands would take more than a quarter of the free memory, or a CUDA call fails).
// Index into sm90::configs(): the measured choice for `s` on the current device, or `rule`.
int measured_config(const MatmulShape& s, int rule);

}  // namespace tpgemm::gemm
