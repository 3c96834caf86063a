#!/usr/bin/env bash
# Replay length at W=2: the shapes whose bench times ran furthest above the planner's, timed with
# 4-, 20- and 60-call graph replays; SM clock and power logged beside.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TPGEMM_TUNE_CACHE=off
bash scripts/setup.sh >/dev/null 2>&1
mkdir -p $OUT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null 2>&1
cmake --build build-gpu -j 16 --target tpgemm-bench > $OUT/build.log 2>&1 || { tail -5 $OUT/build.log; exit 1; }
echo built ${SECONDS}s
B=build-gpu/tpgemm-bench
cat > /tmp/s.txt <<'S'
gemm_ar 9354 1232 15224
gemm_ar 2816 5736 13048
gemm_ar 13051 752 11640
ag_gemm 1774 13480 3496
ag_gemm 7096 6056 5536
gemm_rs 3964 4800 13944
S
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 50 > $OUT/smi.log 2>&1 &
SMI=$!
for it in 4 20 60; do
  echo "it=$it start $(date +%T.%N)" >> $OUT/marks.log
  timeout 200 $B --gpus 2 --shapes /tmp/s.txt --iterations $it --warmup-iterations 5 --timing graph --json $OUT/it${it}.json > $OUT/it${it}.log 2>&1
  echo "it=$it end $(date +%T.%N) rc=$?" >> $OUT/marks.log
  echo t=${SECONDS}s
done
kill $SMI
