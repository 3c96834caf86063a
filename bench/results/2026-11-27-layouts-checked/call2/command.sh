export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; rm -rf $R; mkdir -p $R; B=build-gpu
G=$(nvidia-smi -L | wc -l); WS="4 2"; [ $G -ge 4 ] || WS=2
WORLDS="$WS" DEADLINE=130 bash scripts/gpu_check.sh build > /dev/null 2>&1; cat $R/summary.txt
timeout 70 $B/tests/tpgemm_dist_tests --gtest_filter='W/Layouts.TransposedAAndStrides*' > $R/test_layouts.log 2>&1; echo "layouts test rc=$?"; grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) " $R/test_layouts.log; grep -E "rank [0-9]\]|Failure" $R/test_layouts.log | cut -c1-300 | head -6
for w in $WS; do
  left=$((250 - SECONDS)); [ $left -gt 15 ] || break
  timeout $left $B/tpgemm-bench --gpus $w --op ag_gemm --a-layout km --check --json $R/ag_km_W$w.json > $R/ag_km_W$w.log 2>&1; echo "ag_km W$w rc=$?"; grep -A6 "^geomean" $R/ag_km_W$w.log | head -7; tail -1 $R/ag_km_W$w.log
done
tar czf $OUT/results.tgz -C $R .
