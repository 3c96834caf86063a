#!/usr/bin/env bash
# One-GPU probe: the GEMM core's 192-wide tiles beside the six configurations, then the GPU and
# Python tests of the tree.
set -x
bash scripts/setup.sh >/dev/null 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
git log --oneline | head -1
git status --short | head
R=gpu-results
WORLDS=1 DEADLINE=${CORE_DEADLINE:-260} scripts/gpu_check.sh info build ${CORE_STAGES:-test_gpu} gemm_core
cp $R/summary.txt $R/summary_core.txt
B=build-gpu/tpgemm-bench
: shared shapes graph-timed skipped
timeout 80 $B --gpus 1 --op gemm --check --timing graph --shapes .carry/probe/core_shapes.txt --json $R/core_old_draw.json > $R/core_old_draw.log 2>&1
timeout 130 $B --gpus 1 --op gemm --check --timing graph --random 32 --seed=839790485 --json $R/core_random.json > $R/core_random.log 2>&1
echo rc=$?
grep -A20 ^geomean $R/core_shared_graph.log $R/core_old_draw.log $R/core_random.log | grep -E "W=1|geomean"
tar czf $OUT/r.tgz gpu-results
if [ "${PY:-1}" = 1 ]; then
  WORLDS=1 DEADLINE=${PY_DEADLINE:-120} scripts/gpu_check.sh ${PY_STAGES:-python}
  cat $R/summary.txt
  tar czf $OUT/r.tgz gpu-results
fi
