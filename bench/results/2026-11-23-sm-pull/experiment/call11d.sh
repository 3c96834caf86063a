#!/usr/bin/env bash
# Session 11, call 5: SM pushes (NOTE [sm push]) at W=2: the fused ag_gemm dist tests,
# then the one-wave shapes with SM pushes (pieces 1/4/8) against copy-engine pulls and allgather_gemm.
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
DEADLINE=${DEADLINE:-300} WORLDS=2 DIST_FILTER="FusedAgGemm|BackToBack|CudaGraph|Skips" scripts/gpu_check.sh info build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "tests passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -30
for c in 1 4 8; do
  timeout 60 $B --gpus 2 --op ag_gemm --impl fused --chunks $c --shapes .carry/exp/ag_wave.txt --check \
    --json $R/keep/sm_c$c.json > $R/keep/sm_c$c.log 2>&1
  grep -E "^ag_gemm.*fused|rror" $R/keep/sm_c$c.log | sed "s/^/sm c=$c /"
done
TPGEMM_FUSED_AG_COPY=ce timeout 60 $B --gpus 2 --op ag_gemm --impl fused --chunks 4 --shapes .carry/exp/ag_wave.txt \
  --check --json $R/keep/ce_c4.json > $R/keep/ce_c4.log 2>&1
grep -E "^ag_gemm.*fused|rror" $R/keep/ce_c4.log | sed "s/^/ce c=4 /"
timeout 60 $B --gpus 2 --op ag_gemm --impl baseline,allgather_gemm,pipelined_ce --shapes .carry/exp/ag_wave.txt --check \
  --json $R/keep/others.json > $R/keep/others.log 2>&1
grep -E "^ag_gemm|rror" $R/keep/others.log
tar czf $OUT/results.tgz -C $R .
