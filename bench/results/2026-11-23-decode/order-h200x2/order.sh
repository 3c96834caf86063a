#!/usr/bin/env bash
# Session 10: is `auto` slower than `pipelined_ce` (which it runs) because of what ran before it?
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
DEADLINE=200 WORLDS=2 scripts/gpu_check.sh build > /dev/null 2>&1
B=build-gpu/tpgemm-bench
for order in "auto,pipelined_ce" "pipelined_ce,auto" "pipelined_ce,fused,auto" "fused,pipelined_ce,auto"; do
  timeout 120 $B --gpus 2 --op ag_gemm --impl $order --shapes .carry/exp/ag_big.txt > $OUT/order_${order//,/_}.log 2>&1
  grep -E "^ag_gemm" $OUT/order_${order//,/_}.log | awk -v o="$order" '{print o, $3, $5, $6, $7}'
done
nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
