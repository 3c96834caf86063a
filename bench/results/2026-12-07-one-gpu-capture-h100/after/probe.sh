#!/usr/bin/env bash
# One-GPU check: build, GPU tests, the Python package and its tests (dist_check at W=1).
set -x
bash scripts/setup.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
git log --oneline | head -1
WORLDS=1 DEADLINE=400 scripts/gpu_check.sh build test_gpu python
grep -E "tests passed|FAILED|Failed|passed|failed" gpu-results/test_gpu.log | tail -5
grep -E "FAIL|passed|failed|done" gpu-results/test_python.log | tail -25
tar czf $OUT/r.tgz gpu-results
