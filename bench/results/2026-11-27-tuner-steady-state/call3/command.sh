export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; rm -rf $R; mkdir -p $R; B=build-gpu
WORLDS="4" DEADLINE=150 bash scripts/gpu_check.sh build > /dev/null 2>&1; cat $R/summary.txt
export TPGEMM_TUNE_CACHE=$R/tiny-cache.txt
for run in 1 2; do
  timeout 100 $B/tpgemm-bench --gpus 4 --shapes bench/results/2026-11-27-tuner-steady-state/call3/tiny_shapes.txt --rules --timing graph --iterations 20 --warmup-iterations 5 --check --json $R/tiny_$run.json > $R/tiny_$run.log 2>&1; echo "run $run rc=$?"
done
TPGEMM_TUNE=0 timeout 100 $B/tpgemm-bench --gpus 4 --shapes bench/results/2026-11-27-tuner-steady-state/call3/tiny_shapes.txt --timing graph --iterations 20 --warmup-iterations 5 --check --json $R/tiny_notune.json > $R/tiny_notune.log 2>&1; echo "notune rc=$?"
for f in $R/tiny_1.log $R/tiny_2.log $R/tiny_notune.log; do echo "== $f"; grep -E "^(ag_gemm|gemm_ar|gemm_rs) " $f | awk '{print $1,$3,$4,$5,$6,$7,$8}'; done
tar czf $OUT/results.tgz -C $R .
