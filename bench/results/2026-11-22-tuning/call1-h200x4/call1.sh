#!/usr/bin/env bash
# Session 9, call 1 (exploration on nvidia-h200-x4).
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
save() { cp $R/summary.txt $R/keep/summary_$1.txt; }
DEADLINE=200 WORLDS=4 CHUNKS="1 2 4" SHAPES=bench/results/2026-11-22-tuning/call1-h200x4/ag_small.txt scripts/gpu_check.sh info build sweep_fused; save ag
for c in 1 4; do
  TPGEMM_EXP_PRELOAD=1 timeout 120 $B --gpus 4 --op ag_gemm --impl fused --chunks $c --shapes bench/results/2026-11-22-tuning/call1-h200x4/ag_small.txt --check > $R/keep/preload_c$c.log 2>&1
done
DEADLINE=150 WORLDS=4 COMM_SMS="32 48 64" SHAPES=bench/results/2026-11-22-tuning/call1-h200x4/ar_mid.txt scripts/gpu_check.sh sweep_ar_fused; save ar
DEADLINE=150 WORLDS=4 COMM_SMS="16 32" SHAPES=bench/results/2026-11-22-tuning/call1-h200x4/rs_shapes.txt scripts/gpu_check.sh sweep_rs; save rs
for t in 128 512; do
  TPGEMM_SYMM_THREADS=$t timeout 60 $B --gpus 4 --op gemm_ar --impl baseline,gemm_oneshot,gemm_twoshot --check > $R/keep/gemm_ar_small_t$t.log 2>&1
done
tar czf $OUT/results.tgz -C $R .
