export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=gpu-results; rm -rf $R; mkdir -p $R; B=build-gpu
G=$(nvidia-smi -L | wc -l); WS="4 2"; [ $G -ge 4 ] || WS=2
WORLDS="$WS" DEADLINE=150 bash scripts/gpu_check.sh build > /dev/null 2>&1; cp $R/summary.txt $R/summary_0.txt; cat $R/summary_0.txt
WORLDS="$WS" DEADLINE=$((250 - SECONDS)) DIST_FILTER="Layouts|Fp8Block|Fp8RowWise|OnePlanServes" bash scripts/gpu_check.sh test_dist > /dev/null 2>&1; cp $R/summary.txt $R/summary_1.txt; cat $R/summary_1.txt; grep -E "Failure|rank [0-9]" $R/test_dist.log | cut -c1-400 | head -8
for w in $WS; do
  IT=""; [ $w = 4 ] || IT="--iterations 5 --warmup-iterations 2"
  for e in packed= a_km=--a-layout,km lda=--lda,64 ldd=--ldd,64 b_broadcast=--l,4,--b-broadcast; do
    n=layouts_W${w}_${e%%=*}; f=${e#*=}
    left=$((560 - SECONDS)); [ $left -gt 20 ] || { echo "$n: no time"; continue; }
    timeout $left $B/tpgemm-bench --gpus $w --op ag_gemm,gemm_rs,gemm_ar ${f//,/ } $IT --check --json $R/$n.json > $R/$n.log 2>&1
    echo "$n rc=$? t=$SECONDS"; grep -ciE "check.*(fail|FAIL)|mismatch" $R/$n.log; grep -A5 "^geomean" $R/$n.log | head -6
  done
done
tar czf $OUT/results.tgz -C $R .
