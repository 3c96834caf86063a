#!/usr/bin/env bash
# Session 9, call 2: the fused gemm_ar decode kernel, W=2 (tests, then timed beside the other paths).
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
W=${W:-2}
DEADLINE=400 WORLDS="$W" DIST_FILTER="FusedDecode|PushesNoDecode" scripts/gpu_check.sh info build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "Passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -30
timeout 120 $B --gpus $W --op gemm_ar --impl baseline,gemm_oneshot,gemm_twoshot,fused --shapes .carry/exp/ar_decode.txt \
  --check --json $R/keep/decode_W$W.json > $R/keep/decode_W$W.log 2>&1
grep -E "^gemm_ar|geomean|error|rror" $R/keep/decode_W$W.log
tar czf $OUT/results.tgz -C $R .
