#!/usr/bin/env bash
# Session 9, call 8: the decode kernel with its matmul alone, and its exchange alone (EXPERIMENT knob).
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
DEADLINE=200 WORLDS=2 scripts/gpu_check.sh build
for mode in 0 1 2; do
  TPGEMM_EXP_DECODE=$mode timeout 60 $B --gpus 2 --op gemm_ar --impl fused,gemm_oneshot --shapes bench/results/2026-11-22-tuning/decode-h200x2/ar_decode.txt \
    > $R/keep/decode_mode$mode.log 2>&1
  grep -E "^gemm_ar|rror" $R/keep/decode_mode$mode.log | sed "s/^/mode=$mode /"
done
tar czf $OUT/results.tgz -C $R .
