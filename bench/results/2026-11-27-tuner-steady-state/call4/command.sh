export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; rm -rf $R; mkdir -p $R; B=build-gpu
WORLDS="4" DEADLINE=150 bash scripts/gpu_check.sh build > /dev/null 2>&1; cat $R/summary.txt
WORLDS="2" DEADLINE=$((200 - SECONDS)) bash scripts/gpu_check.sh bench > /dev/null 2>&1; cp $R/summary.txt $R/summary_1.txt; grep -E "rc=| auto |^  (ag_gemm|gemm_rs|gemm_ar) +W=[0-9]  " $R/summary_1.txt
WORLDS="4" SEED=869963777 DEADLINE=$((290 - SECONDS)) bash scripts/gpu_check.sh random > /dev/null 2>&1; cp $R/summary.txt $R/summary_2.txt; grep -E "rc=|drawn|^  (ag_gemm|gemm_rs|gemm_ar) +W=[0-9]  " $R/summary_2.txt
tar czf $OUT/results.tgz -C $R .
