#!/usr/bin/env bash
# One-GPU check of the tree: build, GPU tests, the Python package and its tests, and W=1 plans
# through the tuner and the tuning cache (twice: tuned, then cached).
set -x
bash scripts/setup.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results
WORLDS=1 DEADLINE=330 scripts/gpu_check.sh build test_gpu python
B=build-gpu/tpgemm-bench
export TPGEMM_TUNE_CACHE=$PWD/$R/tune-cache-probe.txt
for op in ag_gemm gemm_rs gemm_ar; do
  for i in 1 2; do
    timeout 60 $B --gpus 1 --op $op --m 4096 --n 4096 --k 4096 --check --iterations 5 --json $R/w1_${op}_$i.json > $R/w1_${op}_$i.log 2>&1; echo "w1 $op run $i rc=$?"
    grep -E "auto|W=1 " $R/w1_${op}_$i.log | head -12
  done
done
wc -l $TPGEMM_TUNE_CACHE; cut -c1-300 $TPGEMM_TUNE_CACHE
tar czf $OUT/r.tgz gpu-results
