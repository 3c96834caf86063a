#!/usr/bin/env bash
# Session 14's experiment, NOTE [own rows in place] (TPGEMM_FUSED_AG_OWN_IN_PLACE=1), on nvidia-h200-x2
# or -x4 (W = every GPU; WORLD=2 on x4 to run W=2 too). About 6 minutes at W=2:
#   1. own_copy_probe: a device-local cudaMemcpyAsync alone and beside a kernel holding all SMs but 8 / 1;
#   2. build; the fused ag_gemm dist tests, the new one among them (at W=2 and, on x4, W=4);
#   3. the shared ag_gemm shapes, fused and the baseline, with the switch off and on, two rounds in turn.
set -u
R=gpu-results; B=build-gpu/tpgemm-bench; E=bench/results/2026-11-23-own-rows/experiment
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=${WORLD:-$(nvidia-smi -L | wc -l)}
mkdir -p $R/keep
nvcc -O2 -arch=sm_90a -o $R/keep/own_copy_probe $E/own_copy_probe.cu && timeout 60 $R/keep/own_copy_probe > $R/keep/probe.txt 2>&1
echo "probe rc=$?"; cat $R/keep/probe.txt
DEADLINE=${DEADLINE:-260} DIST_FILTER="OwnRowsInPlace|FusedAgGemmOver|PlanCallsBackToBack|CudaGraph" \
  scripts/gpu_check.sh info build test_dist
cp $R/summary.txt $R/keep/summary_tests.txt
grep -E "tests passed|Failed|FAILED|rank [0-9]" $R/test_dist.log | head -30
for round in 1 2; do
  for own in 0 1; do
    f=$R/keep/ag_W${W}_own${own}_r$round
    TPGEMM_FUSED_AG_OWN_IN_PLACE=$own timeout 120 $B --gpus $W --op ag_gemm --impl baseline,fused --check --json $f.json \
      > $f.log 2>&1
    grep -E "^ag_gemm" $f.log | sed "s/^/own=$own r=$round /"
  done
done
tar czf $OUT/results.tgz -C $R .
