#!/usr/bin/env bash
# One-GPU probe of the GEMM core's configurations against cuBLASLt. PHASE=1: build, GPU tests,
# shared local matmuls; PHASE=2: the earlier random draw, a fresh draw, ncu of cuBLASLt's kernels.
set -x
bash scripts/setup.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
git log --oneline | head -1
git status --short | head
R=gpu-results
if [ "${PHASE:-1}" = 1 ]; then
  WORLDS=1 DEADLINE=570 scripts/gpu_check.sh info build test_gpu gemm_core
  tail -30 gpu-results/gemm_core.log
else
  B=build-gpu/tpgemm-bench
  timeout 200 $B --gpus 1 --op gemm --check --shapes .carry/probe/core_shapes.txt --json $R/core_old_draw.json > $R/core_old_draw.log 2>&1
  timeout 250 $B --gpus 1 --op gemm --check --random 24 --json $R/core_random.json > $R/core_random.log 2>&1
  echo rc=$?
  head -3 $R/core_random.log
  if [ "${NCU:-0}" = 1 ]; then
    for s in "8192 10728 7632" "8192 10752 7680" "512 1424 1688"; do
      set -- $s
      timeout 40 ncu --clock-control none -k 'regex:nvjet|xmma|gemm|Gemm|device_kernel|cutlass|sm90' --launch-count 12 \
        --section SpeedOfLight --section LaunchStats --section Occupancy \
        $B --gpus 1 --op gemm --m $1 --n $2 --k $3 --iterations 1 --warmup-iterations 0 > $R/ncu_$1_$2_$3.txt 2>&1
    done
  fi
fi
tar czf $OUT/r.tgz gpu-results
