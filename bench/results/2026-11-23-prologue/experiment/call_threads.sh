#!/usr/bin/env bash
# Thirteenth session, nvidia-h200-x2: after the one-load prologue, the symmetric all-reduce's
# threads per block (TPGEMM_SYMM_THREADS) up to 16 MB: 64, 128 (the rule), 256, 512, then 128
# again (drift), one-shot and two-shot beside NCCL, checked.
set -u
R=gpu-results; B=build-gpu/tpgemm-bench; S=bench/results/2026-11-23-prologue/experiment/ar_small.txt
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
scripts/gpu_check.sh build > /dev/null
for t in 64 128 256 512 128; do
  n=$R/threads_$t; [ -e $n.json ] && n=${n}_again
  TPGEMM_SYMM_THREADS=$t timeout 60 $B --gpus 2 --op allreduce --impl nccl,oneshot,twoshot --shapes $S --check \
    --json $n.json > $n.log 2>&1
  echo "threads=$t rc=$?"; grep -E '^allreduce' $n.log
done
tar czf $OUT/results.tgz -C $R .
