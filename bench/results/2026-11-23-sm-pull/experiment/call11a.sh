#!/usr/bin/env bash
# Session 11, call 1: copy-engine pulls alone (ce_probe), then the fused ag_gemm's small shapes at W=2
# (pieces 1/2/4/8 beside allgather_gemm, pipelined_ce, baseline), and an nsys timeline if nsys is there.
set -u
R=gpu-results; B=build-gpu/tpgemm-bench
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $R/keep
(timeout 60 .carry/exp/ce_probe > $R/keep/ce_probe.txt 2>&1; echo "ce_probe rc=$?" >> $R/keep/ce_probe.txt) &
DEADLINE=200 WORLDS=2 scripts/gpu_check.sh info build
wait
cat $R/keep/ce_probe.txt
for c in 1 2 4 8; do
  timeout 60 $B --gpus 2 --op ag_gemm --impl fused --chunks $c --shapes .carry/exp/ag_small.txt --check \
    --json $R/keep/fused_c$c.json > $R/keep/fused_c$c.log 2>&1
  grep -E "^ag_gemm" $R/keep/fused_c$c.log | sed "s/^/c=$c /"
done
timeout 60 $B --gpus 2 --op ag_gemm --impl baseline,allgather_gemm,pipelined_ce --shapes .carry/exp/ag_small.txt --check \
  --json $R/keep/others.json > $R/keep/others.log 2>&1
grep -E "^ag_gemm" $R/keep/others.log
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
if [ -n "$NSYS" ]; then
  timeout 120 $NSYS profile -o $R/keep/ag512 --trace=cuda --force-overwrite true $B --gpus 2 --op ag_gemm \
    --impl fused,allgather_gemm --m 512 --n 8192 --k 8192 --iterations 5 --warmup-iterations 2 > $R/keep/nsys.log 2>&1
  echo "nsys rc=$?"; tail -5 $R/keep/nsys.log
  timeout 100 $NSYS stats --report cuda_gpu_trace --format csv -o $R/keep/ag512 $R/keep/ag512.nsys-rep > /dev/null 2>&1
  ls $R/keep
fi
tar czf $OUT/results.tgz -C $R .
