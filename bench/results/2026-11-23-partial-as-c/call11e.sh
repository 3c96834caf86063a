#!/usr/bin/env bash
# Session 11: gemm_rs at W=2 with the peer's partial as C (NOTE [partial as C]): the dist tests, then
# pipelined_ce on the shared rs shapes with 1 chunk (the reduction schedule) and 2 / 4 / 8 chunks.
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
DEADLINE=${DEADLINE:-230} WORLDS=2 scripts/gpu_check.sh info build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "tests passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -20
for c in 1 2 4 8; do
  timeout 40 $B --gpus 2 --op gemm_rs --impl baseline,pipelined_ce --chunks $c --shapes .carry/exp/rs_all.txt --check \
    --json $R/keep/rs_c$c.json > $R/keep/rs_c$c.log 2>&1
  grep -E "^gemm_rs.*pipelined|rror" $R/keep/rs_c$c.log | sed "s/^/c=$c /"
done
tar czf $OUT/results.tgz -C $R .
