export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; mkdir -p $R/u3; B=build-gpu
cmake --build $B -j 16 > $R/u3/build.log 2>&1; echo "build rc=$? ${SECONDS}s"
timeout 120 $B/tests/tpgemm_dist_tests --gtest_filter='W/Layouts.BatchStrides*' > $R/u3/test_batch.log 2>&1; echo "batch test rc=$?"; grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) " $R/u3/test_batch.log; grep -E "rank [0-9]\]|Failure" $R/u3/test_batch.log | cut -c1-300 | head -6
for w in 4 2; do
  for x in "--batch-pad=64" "--lda=64 --ldd=64 --batch-pad=64"; do
    left=$((330 - SECONDS)); [ $left -gt 15 ] || break
    n=$(echo "W$w $x" | tr -d ' =-');
    timeout $left $B/tpgemm-bench --gpus $w --op ag_gemm,gemm_rs,gemm_ar --m 2048 --n 4096 --k 4096 --l 3 $x --check --json $R/u3/batch_$n.json > $R/u3/batch_$n.log 2>&1; echo "batch W$w [$x] rc=$?"
    grep -E "^(ag_gemm|gemm_rs|gemm_ar) " $R/u3/batch_$n.log | grep -v unsupported | awk '{print $1,$6,$7,$8,$10,$(NF-1),$NF}'
  done
done
for order in allgather_gemm,auto auto,allgather_gemm; do
  left=$((400 - SECONDS)); [ $left -gt 10 ] || break
  timeout $left $B/tpgemm-bench --gpus 4 --op ag_gemm --m 16 --n 1360 --k 24 --impl $order --timing graph --iterations 200 --json $R/u3/order_$order.json > $R/u3/order_$order.log 2>&1
  echo "order $order"; python3 -c "
import json,sys; d=json.load(open('$R/u3/order_$order.json'))
for r in d['rows']: print(r['impl'], r['ran'], r['ms'], r.get('graph_ms'), r.get('call_ms'))"
done
tar czf $OUT/results.tgz -C $R .
