#!/usr/bin/env bash
# Session 9, call 3: the fused gemm_ar decode kernel with splits of K (W from $W).
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
W=${W:-2}
DEADLINE=300 WORLDS="$W" DIST_FILTER="FusedDecode|PushesNoDecode" scripts/gpu_check.sh build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "Passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -30
timeout 60 $B --gpus $W --op gemm_ar --impl baseline,gemm_oneshot,gemm_twoshot,fused --shapes .carry/exp/ar_decode.txt \
  --check --json $R/keep/decode_W$W.json > $R/keep/decode_W$W.log 2>&1
grep -E "^gemm_ar|rror" $R/keep/decode_W$W.log
export TPGEMM_EXP_DEBUG=1
for s in 1 2; do
  TPGEMM_DECODE_SPLITS=$s timeout 60 $B --gpus $W --op gemm_ar --impl fused --shapes .carry/exp/ar_decode.txt \
    --check > $R/keep/decode_W${W}_s$s.log 2>&1
  grep -E "^gemm_ar.*fused|rror|decode:" $R/keep/decode_W${W}_s$s.log | sed "s/^/splits=$s /"
done
tar czf $OUT/results.tgz -C $R .
