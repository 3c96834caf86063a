export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; rm -rf $R; mkdir -p $R; B=build-gpu
G=$(nvidia-smi -L | wc -l); WS="4 2"; [ $G -ge 4 ] || WS=2
WORLDS="$WS" DEADLINE=140 bash scripts/gpu_check.sh build > /dev/null 2>&1; cp $R/summary.txt $R/summary_0.txt; cat $R/summary_0.txt
WORLDS="$WS" DEADLINE=$((330 - SECONDS)) DIST_FILTER="Layouts|Fp8RowWise|Fp8Block|AutoRunsWhatItsTuning|AllReduceKernels|KernelFamilies" bash scripts/gpu_check.sh test_dist > /dev/null 2>&1; cp $R/summary.txt $R/summary_1.txt; grep -E "Test +#" $R/test_dist.log | grep -v Skipped; grep -E "Failure|rank [0-9]\]" $R/test_dist.log | cut -c1-400 | head -8
WORLDS="4" DEADLINE=$((430 - SECONDS)) bash scripts/gpu_check.sh random > /dev/null 2>&1; cp $R/summary.txt $R/summary_2.txt; grep -E "rc=|drawn|^  (ag_gemm|gemm_rs|gemm_ar) +W=[0-9]  " $R/summary_2.txt
WORLDS="$WS" DEADLINE=$((570 - SECONDS)) bash scripts/gpu_check.sh bench > /dev/null 2>&1; cp $R/summary.txt $R/summary_3.txt; grep -E "rc=| auto |^  (ag_gemm|gemm_rs|gemm_ar) +W=[0-9]  " $R/summary_3.txt
tar czf $OUT/results.tgz -C $R .
