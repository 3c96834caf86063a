set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=${W:-2}
DIST_FILTER="(Dist\.|KernelFamilies|Determinism|CallGraphs\.).*/W$W\$" WORLDS=$W bash scripts/gpu_check.sh build test_dist > /tmp/gc.log 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Total Test|error" gpu-results/test_dist.log | head -20
grep -B5 -A30 "FAILED\|Failure" gpu-results/test_dist.log | head -60
for s in "8192 8192 2048" "8000 8192 2048" "5917 1400 4272" "3000 8192 4096" "201 4096 4096"; do set -- $s
  timeout 120 build-gpu/tpgemm-bench --gpus $W --op gemm_ar --m $1 --n $2 --k $3 --impl fused,pipelined_ce,gemm_twoshot --timing graph --check 2>&1 | grep -E "^gemm_ar|FAIL|rror"
done
mkdir -p $OUT/r && cp gpu-results/*.log $OUT/r/ 2>/dev/null
