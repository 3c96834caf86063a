#!/usr/bin/env bash
# One-GPU probe of the GEMM core's configurations against cuBLASLt, kernels timed from CUDA graphs.
set -x
bash scripts/setup.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
git log --oneline | head -1
R=gpu-results
WORLDS=1 DEADLINE=330 scripts/gpu_check.sh info build test_gpu gemm_core
B=build-gpu/tpgemm-bench
timeout 100 $B --gpus 1 --op gemm --check --timing graph --shapes .carry/probe/core_shapes.txt --json $R/core_old_draw.json > $R/core_old_draw.log 2>&1
timeout 150 $B --gpus 1 --op gemm --check --timing graph --random 32 --json $R/core_random.json > $R/core_random.log 2>&1
echo rc=$?
head -1 $R/core_random.log
grep -A14 ^geomean $R/core_old_draw.log $R/core_random.log
tar czf $OUT/r.tgz gpu-results
