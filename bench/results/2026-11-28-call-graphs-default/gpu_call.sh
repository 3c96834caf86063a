#!/usr/bin/env bash
# W: world; the tree's default (call graphs on) for every plan
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=${W:-2}
mkdir -p gpu-results
DEADLINE=${DL:-540} DIST_FILTER="/W$W" WORLDS="$W" BLOCK_ARGS="--modes fwd --variants nccl_compiled,torch_async_tp,tpgemm_eager,tpgemm_compiled,tpgemm_graph,no_comm_compiled" \
  bash scripts/gpu_check.sh build test_dist python_install block
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Total Test" gpu-results/test_dist.log
tail -12 gpu-results/block_W$W.log
