#!/usr/bin/env bash
# Session 10: the decode matmul on one GPU (decode_probe.cu, built on the CPU machine), then ncu.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi -L
P=.carry/exp/decode_probe
timeout 120 $P 2>&1 | tee $OUT/probe.txt
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
true

true
echo "ncu details rc=$?"
