#!/usr/bin/env bash
# W: world of the dist tests and benches. The tree's defaults (call graphs on).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=${W:-4}
mkdir -p gpu-results
DEADLINE=${DL:-395} DIST_FILTER="${DF:-/W$W}" WORLDS="$W" \
  BLOCK_ARGS="--modes fwd --variants ${BV:-nccl_compiled,tpgemm_eager,tpgemm_compiled,no_comm_compiled}" \
  bash scripts/gpu_check.sh build test_dist python_install ${STAGES:-block host_time}
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Total Test" gpu-results/test_dist.log
grep -E " us( |$)" gpu-results/host_time_W$W.log 2>/dev/null
tail -12 gpu-results/block_W$W.log 2>/dev/null
