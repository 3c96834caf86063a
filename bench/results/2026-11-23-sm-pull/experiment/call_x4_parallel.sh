#!/usr/bin/env bash
# Session 11's copy-engine patch for the fused ag_gemm at one wave (bench/results/2026-11-23-sm-pull/
# experiment/ce_parallel.diff: the W-1 stages pulled side by side, TPGEMM_FUSED_AG_PARALLEL=0 in a row)
# on a 4-GPU machine: the fused dist tests at W=4, then the one-wave shape with 1/2/4 pieces both ways.
set -u
R=gpu-results; B=build-par/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
P=bench/results/2026-11-23-sm-pull/experiment/ce_parallel.diff
git apply $P 2>/dev/null || patch -p1 < $P || { echo "patch failed"; exit 1; }
DEADLINE=${DEADLINE:-300} WORLDS="4" BUILD=build-par DIST_FILTER="FusedAgGemm|BackToBack|CudaGraph" \
  scripts/gpu_check.sh info build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "tests passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -30
printf 'ag 512 8192 8192\n' > $R/keep/one_wave.txt
for par in 1 0; do
  for c in 1 2 4; do
    TPGEMM_FUSED_AG_PARALLEL=$par timeout 60 $B --gpus 4 --op ag_gemm --impl fused,allgather_gemm --chunks $c \
      --shapes $R/keep/one_wave.txt --check --json $R/keep/par${par}_c$c.json > $R/keep/par${par}_c$c.log 2>&1
    grep -E "^ag_gemm|rror" $R/keep/par${par}_c$c.log | sed "s/^/parallel=$par c=$c /"
  done
done
tar czf $OUT/results.tgz -C $R .
