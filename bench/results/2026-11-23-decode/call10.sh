#!/usr/bin/env bash
# Session 10: the decode kernel's two-shot exchange at W (tests, then timed beside one-shot and the other paths).
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
W=${W:-2}
DEADLINE=${DEADLINE:-400} WORLDS="$W" DIST_FILTER="FusedDecode|PushesNoDecode" scripts/gpu_check.sh info build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "Passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -30
for ts in 0 1; do
  TPGEMM_DECODE_TWO_SHOT=$ts timeout 120 $B --gpus $W --op gemm_ar --impl baseline,gemm_oneshot,gemm_twoshot,fused \
    --shapes .carry/exp/ar_decode.txt --check --json $R/keep/decode_W${W}_twoshot$ts.json > $R/keep/decode_W${W}_twoshot$ts.log 2>&1
  grep -E "^gemm_ar|error|rror" $R/keep/decode_W${W}_twoshot$ts.log | sed "s/^/two_shot=$ts /"
done
tar czf $OUT/results.tgz -C $R .
