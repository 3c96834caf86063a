#!/usr/bin/env bash
# Session 11's SM-push patch for the fused ag_gemm at one wave (bench/results/2026-11-23-sm-pull/
# experiment/sm_push.diff, NOTE [sm push]) on a 4-GPU machine: its dist tests at W=4 and W=2, then
# fused with copy engines and with SM pushes beside allgather_gemm and the baseline, shared shapes.
set -u
R=gpu-results; B=build-push/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
P=bench/results/2026-11-23-sm-pull/experiment/sm_push.diff
git apply $P 2>/dev/null || patch -p1 < $P || { echo "patch failed"; exit 1; }
DEADLINE=${DEADLINE:-330} WORLDS="4 2" BUILD=build-push DIST_FILTER="FusedAgGemm|BackToBack|CudaGraph|Skips" \
  scripts/gpu_check.sh info build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "tests passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -30
for w in 4 2; do
  for copy in ce auto; do  # auto: the patch's rule, SM pushes at one wave only (forced everywhere they lose 2-4x)
    [ $copy = auto ] && unset TPGEMM_FUSED_AG_COPY || export TPGEMM_FUSED_AG_COPY=$copy
    timeout 90 $B --gpus $w --op ag_gemm --impl fused --shapes bench/shapes.txt --check \
      --json $R/keep/fused_W${w}_$copy.json > $R/keep/fused_W${w}_$copy.log 2>&1
    grep -E "^ag_gemm.*fused|rror" $R/keep/fused_W${w}_$copy.log | sed "s/^/copy=$copy /"
  done
done
unset TPGEMM_FUSED_AG_COPY
tar czf $OUT/results.tgz -C $R .
