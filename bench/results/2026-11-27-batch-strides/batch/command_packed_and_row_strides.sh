export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; rm -rf $R; mkdir -p $R; B=build-gpu
G=$(nvidia-smi -L | wc -l); WS="4 2"; [ $G -ge 4 ] || WS=2
WORLDS="$WS" DEADLINE=140 bash scripts/gpu_check.sh build > /dev/null 2>&1; cp $R/summary.txt $R/summary_0.txt; cat $R/summary_0.txt
WORLDS="$WS" DEADLINE=$((330 - SECONDS)) DIST_FILTER="Layouts" bash scripts/gpu_check.sh test_dist > /dev/null 2>&1; cp $R/summary.txt $R/summary_1.txt; grep -E "Test +#" $R/test_dist.log | grep -v Skipped; grep -E "Failure|rank [0-9]\]" $R/test_dist.log | cut -c1-400 | head -8
for w in $WS; do
  for x in "" "--lda=64 --ldd=64" "--batch-pad=64" "--lda=64 --ldd=64 --batch-pad=64"; do
    left=$((470 - SECONDS)); [ $left -gt 15 ] || break
    n=$(echo "W$w $x" | tr -d ' =-'); 
    timeout $left $B/tpgemm-bench --gpus $w --op ag_gemm,gemm_rs,gemm_ar --m 2048 --n 4096 --k 4096 --l 3 $x --check --json $R/batch_$n.json > $R/batch_$n.log 2>&1; echo "batch W$w [$x] rc=$?"
    grep -E "^(ag_gemm|gemm_rs|gemm_ar) " $R/batch_$n.log | awk '{print $1,$6,$7,$8,$10,$(NF-1),$NF}' | head -20; grep -c " ok " $R/batch_$n.log
  done
done
for order in allgather_gemm,auto auto,allgather_gemm; do
  left=$((560 - SECONDS)); [ $left -gt 10 ] || break
  timeout $left $B/tpgemm-bench --gpus 4 --op ag_gemm --m 16 --n 1360 --k 24 --impl $order --timing graph --iterations 200 > $R/order_$order.log 2>&1
  echo "order $order"; grep -E "^ag_gemm " $R/order_$order.log | awk '{print $6,$7,$8}'
done
tar czf $OUT/results.tgz -C $R .
