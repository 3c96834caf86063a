#!/usr/bin/env bash
# The one command behind every GPU figure tpgemm claims. On a machine with Hopper GPUs and no
# network: builds with all cores, runs the gpu and dist tests, times the GEMM core against
# cuBLASLt on one GPU, runs tpgemm-bench --check on the shared shapes at W=4 and W=2 (JSON), and
# times the PyTorch peers (bench/torch_peers.py) on the same machine in the same call.
# The CUTLASS headers come from .carry/ (scripts/carry_cutlass.sh, run where there is network).
#
#   scripts/gpu_check.sh [STAGE ...]
#   stages: info build test_cpu test_gpu test_dist soak sanitize python python_install block host_time timeline gemm_core bench random plan_m auto_vs_rules direct_stores dtypes batch_first layouts bench_n peers ladder
#           sweep sweep_fused sweep_rs
#           sweep_ar_fused sweep_decode sweep_small sweep_ring
#   (default: info build test_cpu test_gpu test_dist gemm_core bench peers)
#
# Logs go to ./gpu-results: one per stage, bench_W*.json, peers_W*.json, compare_W*.md (bench/compare.py:
# the side-by-side table and where each target stands, also in the summary) and summary.txt; when
# $OUT is set (a remote GPU machine), they are also packed into $OUT/results.tgz. WORLDS="4 2"
# picks the world sizes; BENCH_ARGS the tpgemm-bench flags (default --check); DIST_FILTER a ctest
# -R regex for the dist tests; RANDOM_SHAPES and SEED the random and plan_m stages' draw, PLAN_M the plan_m stage's plan; TIMELINE_ARGS the
# timeline stage's flags (e.g. "--op gemm_ar --m 8192 --configs pipelined_ce:4"); SHAPES the shapes file of the sweep_fused, sweep_rs, sweep_ar_fused,
# sweep_decode and sweep_ring stages; BLOCK_ARGS the block stage's bench/torch_block.py flags;
# SOAK_CALLS (and SEED) the soak stage's; BATCH the batch_first stage's batch; TPGEMM_PEERS another torch_peers.py. Every stage
# takes DEADLINE (seconds from the start) as the whole run's bound. NVLink multicast
# stays off (NCCL_NVLS_ENABLE=0 and friends).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
LOGS=$ROOT/gpu-results
BUILD=${BUILD:-$ROOT/build-gpu}
mkdir -p "$LOGS"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The planner's tuning cache of this run, among its results (a fresh machine starts empty).
export TPGEMM_TUNE_CACHE=${TPGEMM_TUNE_CACHE:-$LOGS/tune-cache.txt}
STAGES=${*:-info build test_cpu test_gpu test_dist gemm_core bench peers}
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
WORLDS=${WORLDS:-"4 2"}
BENCH_ARGS=${BENCH_ARGS:-"--check"}
SUMMARY=$LOGS/summary.txt
: > "$SUMMARY"

note() { echo "$*" | tee -a "$SUMMARY"; }
# The result rows of stage NAME's log that match REGEX, into the summary, each led by NAME.
rows_to_summary() { grep -E "$2" "$LOGS/$1.log" | sed "s/^/$1 /" | tee -a "$SUMMARY" > /dev/null; }
pack() { [ -n "${OUT:-}" ] && tar czf "$OUT/results.tgz" -C "$LOGS" . 2>/dev/null && cp "$SUMMARY" "$OUT/summary.txt"; true; }
# DEADLINE (seconds from the start, optional) bounds the whole run: a stage gets what is left.
stage() {  # stage NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2; shift 2
  if [ -n "${DEADLINE:-}" ]; then
    local left=$((DEADLINE - SECONDS - 20))
    [ "$left" -lt 20 ] && { note "$(printf '%-14s skipped: out of time' "$name")"; return 124; }
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  local t0=$SECONDS
  timeout --signal=TERM --kill-after=10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  note "$(printf '%-14s rc=%-3d %4ds  %s' "$name" "$rc" $((SECONDS - t0)) "$LOGS/$name.log")"
  pack
  return $rc
}

find_peers() {
  for p in "${TPGEMM_PEERS:-}" bench/torch_peers.py; do
    [ -n "$p" ] && [ -f "$p" ] && { echo "$p"; return; }
  done
}

# The Python package into the same build tree (pip, scikit-build-core: the CUDA code built once).
install_python() {
  stage python_install 900 python3 -m pip install --no-deps --no-build-isolation . -Cbuild-dir="$BUILD" \
    -Cbuild.targets=all -Ccmake.define.TPGEMM_BUILD_TESTS=ON
}

note "tpgemm gpu_check $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname): $GPUS GPU(s); stages: $STAGES"
for s in $STAGES; do
  case $s in
    info)
      stage info 60 bash -c 'nvidia-smi; nvidia-smi topo -m; nvcc --version | tail -1; cmake --version | head -1;
        grep -h "define NCCL_\(MAJOR\|MINOR\|PATCH\)" /usr/include/nccl.h 2>/dev/null; nproc; free -g | head -2' ;;
    build)
      stage configure 300 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release &&
      stage build 900 cmake --build "$BUILD" -j "$(nproc)" ;;
    python)  # the Python package into the same build tree (pip, scikit-build-core), then its tests:
             # CPU ones and tests/python/dist_check.py under torchrun at each world size that fits
      install_python &&
      stage test_python 1500 bash -c "cd '$BUILD' && python3 -m pytest -v -rs -s '$ROOT/tests/python'"
      grep -E "^(host time|dist_check|ops:)|FAIL|passed|failed" "$LOGS/test_python.log" | tee -a "$SUMMARY" > /dev/null ;;
    block)  # the Llama-style block end to end in PyTorch: NCCL + matmul, torch async-TP and tpgemm
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        # shellcheck disable=SC2086
        stage "block_W$w" 900 python3 -m torch.distributed.run --standalone --nproc-per-node "$w" bench/torch_block.py \
          ${BLOCK_ARGS:-} --json "$LOGS/block_W$w.json"
        grep -A60 "^summary\|geomean" "$LOGS/block_W$w.log" | tail -60 | tee -a "$SUMMARY" > /dev/null
      done ;;
    python_install) install_python ;;  # the package alone (for the block, host_time and timeline stages)
    timeline)  # one call's kernels and copies (bench/timeline.py; TIMELINE_ARGS: its flags), each W
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        # shellcheck disable=SC2086
        stage "timeline_W$w" 300 python3 -m torch.distributed.run --standalone --nproc-per-node "$w" bench/timeline.py -- \
          ${TIMELINE_ARGS:-} --out "$LOGS/timeline_W$w"
        grep -E "^==|call:" "$LOGS/timeline_W$w.log" | sed "s/^/W=$w /" | tee -a "$SUMMARY" > /dev/null
      done ;;
    host_time)  # host microseconds per eager torch call, layer by layer (bench/host_time.py), the GPU held busy
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        stage "host_time_W$w" 300 python3 -m torch.distributed.run --standalone --nproc-per-node "$w" bench/host_time.py \
          --json "$LOGS/host_time_W$w.json"
        grep -E " us( |$)" "$LOGS/host_time_W$w.log" | sed "s/^/W=$w /" | tee -a "$SUMMARY" > /dev/null
      done ;;
    test_cpu) stage test_cpu 600 ctest --test-dir "$BUILD" -L cpu --output-on-failure -j 8 ;;
    test_gpu) stage test_gpu 900 ctest --test-dir "$BUILD" -L gpu --output-on-failure ;;
    soak)  # the random soak's long run (tests/dist/test_soak.cpp): SOAK_CALLS calls per op, each W of WORLDS
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        # (the test binary itself: ctest's per-test limit is the bounded run's)
        stage "soak_W$w" 1500 env TPGEMM_SOAK_CALLS="${SOAK_CALLS:-10000}" ${SEED:+TPGEMM_SOAK_SEED="$SEED"} \
          "$BUILD/tests/tpgemm_dist_tests" --gtest_filter="W/Soak.*/W$w"
        grep -E "^soak W=" "$LOGS/soak_W$w.log" | tee -a "$SUMMARY" > /dev/null
      done ;;
    test_dist) stage test_dist 1500 ctest --test-dir "$BUILD" -L dist ${DIST_FILTER:+-R "$DIST_FILTER"} --output-on-failure ;;
    gemm_core)  # the Hopper GEMM core alone on one GPU against cuBLASLt, bf16 and fp16, checked;
                # first the HGMMA count of each of its kernels (cuobjdump -sass, tests/check_hgmma.sh)
      stage gemm_core 900 bash -c "set -o pipefail
        ctest --test-dir '$BUILD' -R Sm90Kernels.UseWgmma -V | sed -n 's/^[0-9]*: //p'; hgmma=\$?
        '$BUILD/tpgemm-bench' --gpus 1 --op gemm --check --json '$LOGS/gemm_core.json'; bf16=\$?
        '$BUILD/tpgemm-bench' --gpus 1 --op gemm --check --dtype fp16 --json '$LOGS/gemm_core_fp16.json'; fp16=\$?
        exit \$((hgmma | bf16 | fp16))"
      grep -E "^(kernels:|PASS|FAIL)|^  gemm" "$LOGS/gemm_core.log" | tee -a "$SUMMARY" > /dev/null ;;
    bench)
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || { note "bench W=$w skipped: $GPUS GPUs"; continue; }
        # shellcheck disable=SC2086
        stage "bench_W$w" 1500 "$BUILD/tpgemm-bench" --gpus "$w" $BENCH_ARGS --json "$LOGS/bench_W$w.json"
        grep -A40 "^geomean" "$LOGS/bench_W$w.log" | tee -a "$SUMMARY" > /dev/null
      done ;;
    random)  # RANDOM_SHAPES shapes per GEMM op drawn from SEED (fresh unless given; printed), every
             # implementation checked against the reference and timed from CUDA graphs (most take a few
             # microseconds, less than the host's enqueue), auto tuned on its plan creation
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || { note "random W=$w skipped: $GPUS GPUs"; continue; }
        stage "random_W$w" 1500 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm,gemm_rs,gemm_ar \
          --random "${RANDOM_SHAPES:-40}" ${SEED:+--seed "$SEED"} --check --iterations 20 --warmup-iterations 5 --timing graph \
          --json "$LOGS/random_W$w.json"
        grep -E "drawn with|^geomean|^auto against|^  (ag_gemm|gemm_rs|gemm_ar) .*(auto|W=)" "$LOGS/random_W$w.log" | \
          tee -a "$SUMMARY" > /dev/null
      done ;;
    plan_m)  # the random stage's draw with every plan but the baseline's made for PLAN_M rows (default
             # 16384, at least the shape's M) and called with the shape's M: what a plan's range of M
             # runs (a serving loop's, packed batches' token counts), beside the exact baseline
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || { note "plan_m W=$w skipped: $GPUS GPUs"; continue; }
        stage "plan_m_W$w" 1500 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm,gemm_rs,gemm_ar \
          --random "${RANDOM_SHAPES:-40}" ${SEED:+--seed "$SEED"} --plan-m "${PLAN_M:-16384}" --check --iterations 20 \
          --warmup-iterations 5 --timing graph --json "$LOGS/plan_m_W$w.json"
        grep -E "drawn with|^geomean|^auto against|^  (ag_gemm|gemm_rs|gemm_ar) .*(auto|W=)" "$LOGS/plan_m_W$w.log" | \
          sed "s/^/plan_m /" | tee -a "$SUMMARY" > /dev/null
      done ;;
    direct_stores)  # pipelined_ce's gemm_rs and gemm_ar on the shared shapes with its matmuls storing
                    # into the peers' slots (TPGEMM_PIPELINED_DIRECT=1, NOTE [direct stores]) and staged,
                    # beside the baseline, checked; the tuning cache off (a choice of either kind)
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for direct in 0 1; do
          TPGEMM_PIPELINED_DIRECT=$direct TPGEMM_TUNE_CACHE=off stage "direct${direct}_W$w" 900 "$BUILD/tpgemm-bench" \
            --gpus "$w" --op gemm_rs,gemm_ar --impl baseline,pipelined_ce --check --iterations 20 --timing graph \
            --json "$LOGS/direct${direct}_W$w.json"
          grep -A8 "^geomean" "$LOGS/direct${direct}_W$w.log" | sed "s/^/direct=$direct /" | tee -a "$SUMMARY" > /dev/null
        done
      done ;;
    auto_vs_rules)  # the shared shapes: auto tuned on plan creation against auto from the planner's
                    # rules alone (bench --rules), beside the baseline, in the same run
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        stage "rules_W$w" 900 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm,gemm_rs,gemm_ar --impl auto --rules --check \
          --iterations 20 --timing graph --json "$LOGS/rules_W$w.json"
        grep -A12 "^geomean" "$LOGS/rules_W$w.log" | tee -a "$SUMMARY" > /dev/null
      done ;;
    batch_first)  # batch-first activations ([B, S/W, H], B = BATCH, default 4) split along S: torch's
                  # functional collectives + matmul, torch's async-TP ops and tpgemm's torch ops
                  # along dim 1, the shared shapes (after python_install)
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        stage "batch_first_W$w" 900 python3 -m torch.distributed.run --standalone --nproc-per-node "$w" \
          bench/torch_peers.py bench/shapes.txt --batch "${BATCH:-4}" --json "$LOGS/batch_first_W$w.json"
        rows_to_summary "batch_first_W$w" "^(ag|rs) "
      done ;;
    dtypes)  # FP8 beside bf16 in the same call: every op's implementations on the shared shapes with
             # e4m3 A and B (each rank's scales: tensor-wise, row-wise, then in blocks) and with bf16,
             # D in bf16, checked (DTYPES: which of them, as TYPE:SCALE); then the FP8 torch peers
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for d in ${DTYPES:-e4m3:tensor e4m3:row e4m3:block bf16:tensor}; do
          name=dtypes_W${w}_${d/:/_}
          stage "$name" 600 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm,gemm_rs,gemm_ar --dtype "${d%%:*}" \
            --scale "${d##*:}" --out-dtype bf16 --check --json "$LOGS/$name.json"
          grep -A12 "^geomean" "$LOGS/$name.log" | sed "s/^/$d /" | tee -a "$SUMMARY" > /dev/null
        done
        # torch's FP8 async-TP ops beside NCCL + torch._scaled_mm and tpgemm's torch ops (after python_install)
        stage "peers_fp8_W$w" 900 python3 -m torch.distributed.run --standalone --nproc-per-node "$w" \
          bench/torch_peers.py bench/shapes.txt --fp8 --json "$LOGS/peers_fp8_W$w.json"
        rows_to_summary "peers_fp8_W$w" "^(ag|rs) "
        python3 bench/compare.py "$LOGS/dtypes_W${w}_e4m3_tensor.json" "$LOGS/peers_fp8_W$w.json" \
          > "$LOGS/compare_fp8_W$w.md" 2>&1 && grep -E "^- W=" "$LOGS/compare_fp8_W$w.md" | sed "s/^/fp8 /" | tee -a "$SUMMARY" > /dev/null
      done ;;
    layouts)  # operands other than packed, every implementation that takes them, checked and timed
              # beside the packed run: A stored [K, M], A's and D's rows at a stride, a batch of 4
              # sharing one B (LAYOUTS: which, as NAME=FLAGS with commas for spaces)
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for entry in ${LAYOUTS:-packed= a_km=--a-layout,km lda=--lda,64 ldd=--ldd,64 b_broadcast=--l,4,--b-broadcast}; do
          name=layouts_W${w}_${entry%%=*}
          flags=${entry#*=}
          # shellcheck disable=SC2086
          stage "$name" 600 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm,gemm_rs,gemm_ar ${flags//,/ } --check \
            --json "$LOGS/$name.json"
          grep -A12 "^geomean" "$LOGS/$name.log" | sed "s/^/${entry%%=*} /" | tee -a "$SUMMARY" > /dev/null
        done
      done ;;
    bench_n)  # ag_gemm and gemm_rs along N (--shard n: B's columns gathered, D's columns scattered)
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        # shellcheck disable=SC2086
        stage "bench_n_W$w" 600 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm,gemm_rs --shard n $BENCH_ARGS \
          --json "$LOGS/bench_n_W$w.json"
        grep -A8 "^geomean" "$LOGS/bench_n_W$w.log" | tee -a "$SUMMARY" > /dev/null
      done ;;
    ladder)  # the nvFuser study's rungs beside fused and the baseline (docs/design.md), fp16 as in the study
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        stage "ladder_W$w" 600 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm --impl ladder --dtype fp16 \
          --shapes bench/ladder_shapes.txt --iterations 5 --warmup-iterations 1 --check --json "$LOGS/ladder_W$w.json"
        rows_to_summary "ladder_W$w" "^ag_gemm"
      done ;;
    sweep)  # calibration of the planner: every implementation, pipelined at several chunkings
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for c in 1 2 4; do
          stage "sweep_ar_W${w}_c$c" 300 "$BUILD/tpgemm-bench" --gpus "$w" --op gemm_ar --chunks "$c" \
            --shapes bench/ar_sweep.txt --iterations 20 --json "$LOGS/sweep_ar_W${w}_c$c.json"
        done
        stage "sweep_agrs_W${w}_c2" 300 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm,gemm_rs --impl pipelined \
          --chunks 2 --iterations 20 --json "$LOGS/sweep_agrs_W${w}_c2.json"
      done ;;
    sweep_fused)  # the fused ag_gemm at CHUNKS pieces per rank block and SWIZZLES, beside the baseline
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for c in ${CHUNKS:-1 2 4}; do
          for z in ${SWIZZLES:-auto}; do
            name=sweep_fused_W${w}_c${c}_s$z
            TPGEMM_SM90_SWIZZLE=${z/auto/} stage "$name" 300 "$BUILD/tpgemm-bench" --gpus "$w" --op ag_gemm \
              --impl fused --chunks "$c" --shapes "${SHAPES:-bench/shapes.txt}" --check --json "$LOGS/$name.json"
            rows_to_summary "$name" "^ag_gemm"
          done
        done
      done ;;
    sweep_rs)  # the fused gemm_rs with COMM_SMS SMs for its reduction beside the GEMM, against pipelined_ce
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for c in ${COMM_SMS:-2 4 8 16}; do
          stage "sweep_rs_W${w}_s$c" 300 "$BUILD/tpgemm-bench" --gpus "$w" --op gemm_rs --impl fused,pipelined \
            --comm-sms "$c" --shapes "${SHAPES:-bench/shapes.txt}" --check --json "$LOGS/sweep_rs_W${w}_s$c.json"
          rows_to_summary "sweep_rs_W${w}_s$c" "^gemm_rs"
        done
      done ;;
    sweep_ar_fused)  # the fused gemm_ar with COMM_SMS SMs beside the GEMM, against gemm_twoshot, from 512 rows up
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for c in ${COMM_SMS:-8 16 32}; do
          name=sweep_ar_fused_W${w}_s$c
          stage "$name" 300 "$BUILD/tpgemm-bench" --gpus "$w" --op gemm_ar --impl fused,gemm_twoshot --comm-sms "$c" \
            --shapes "${SHAPES:-bench/ar_sweep.txt}" --check --json "$LOGS/$name.json"
          rows_to_summary "$name" "^gemm_ar"
        done
      done ;;
    sweep_decode)  # fused gemm_ar's decode kernel with each exchange (TPGEMM_DECODE_TWO_SHOT 0, 1) beside
                   # the matmul then the one-shot or two-shot all-reduce, M = 16 ... 256
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for ts in 0 1; do
          name=sweep_decode_W${w}_twoshot$ts
          stage "$name" 300 env TPGEMM_DECODE_TWO_SHOT="$ts" "$BUILD/tpgemm-bench" --gpus "$w" --op gemm_ar \
            --impl baseline,gemm_oneshot,gemm_twoshot,fused --shapes "${SHAPES:-bench/ar_decode.txt}" --check \
            --json "$LOGS/$name.json"
          rows_to_summary "$name" "^gemm_ar"
        done
      done ;;
    sweep_ring)  # pipelined_ce's gemm_rs and gemm_ar with the slot reduction (1 chunk) and with each block's
                 # sum passed around the ring as the matmuls' C (2 and 4 chunks; NOTE [partial as C])
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for c in ${CHUNKS:-1 2 4}; do
          name=sweep_ring_W${w}_c$c
          stage "$name" 300 "$BUILD/tpgemm-bench" --gpus "$w" --op gemm_rs,gemm_ar --impl pipelined --chunks "$c" \
            --shapes "${SHAPES:-bench/shapes.txt}" --check --json "$LOGS/$name.json"
          rows_to_summary "$name" "^gemm_(rs|ar)"
        done
      done ;;
    sweep_small)  # ag_gemm and gemm_rs from 128 rows up: where the symmetric collective behind one matmul
                  # (allgather_gemm, gemm_reducescatter) wins and where the pipeline takes over
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        for op in ag_gemm gemm_rs; do
          shapes=bench/ag_sweep.txt
          [ "$op" = gemm_rs ] && shapes=bench/rs_sweep.txt
          stage "sweep_${op}_W$w" 300 "$BUILD/tpgemm-bench" --gpus "$w" --op "$op" --shapes "$shapes" --check \
            --json "$LOGS/sweep_${op}_W$w.json"
          rows_to_summary "sweep_${op}_W$w" "^$op"
        done
      done ;;
    sanitize)  # compute-sanitizer's memcheck, racecheck and synccheck over the gpu tests (one GPU) and
               # the dist test that runs every kernel family of tpgemm's own once on a small problem
               # (tests/dist/test_kernel_families.cpp) at W=2. SANITIZE_TOOLS picks among the three;
               # SANITIZE_GPU and SANITIZE_DIST are gtest filters. Every rank runs under the tool
               # (--target-processes all), whose one summary and exit code cover them all (the
               # ranks' NCCL API errors showed up in it while they were counted). CUDA API errors
               # are not counted (--report-api-errors no): NCCL probes the driver and falls back
               # (cuMemCreate of a handle type not permitted, kernel images for other
               # architectures); tpgemm checks every return code itself.
      gpu_filter=${SANITIZE_GPU:-"*"}
      dist_filter=${SANITIZE_DIST:-"W/KernelFamilies.*/W2"}
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
        stage "sanitize_gpu_$tool" 900 compute-sanitizer --tool "$tool" --error-exitcode 99 --target-processes all \
          --report-api-errors no \
          "$BUILD/tests/tpgemm_gpu_tests" --gtest_filter="$gpu_filter"
        [ "$GPUS" -ge 2 ] && stage "sanitize_dist_$tool" 900 compute-sanitizer --tool "$tool" --error-exitcode 99 \
          --target-processes all --report-api-errors no "$BUILD/tests/tpgemm_dist_tests" --gtest_filter="$dist_filter"
        for f in "$LOGS/sanitize_gpu_$tool.log" "$LOGS/sanitize_dist_$tool.log"; do
          [ -f "$f" ] && grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED) " "$f" | sed "s|^|$(basename "$f" .log) |" |
            tee -a "$SUMMARY" > /dev/null
        done
      done ;;
    peers)
      peers=$(find_peers)
      [ -n "$peers" ] || { note "peers skipped: torch_peers.py not found (set TPGEMM_PEERS)"; continue; }
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        stage "peers_W$w" 900 python3 -m torch.distributed.run --standalone --nproc-per-node "$w" "$peers" \
          bench/shapes.txt --json "$LOGS/peers_W$w.json"
        stage "peers_ar_W$w" 600 python3 -m torch.distributed.run --standalone --nproc-per-node "$w" "$peers" \
          bench/allreduce_sizes.txt --json "$LOGS/peers_ar_W$w.json"
      done
      # CUTLASS's Distributed GEMM (tools/peers/cutlass_distgemm.cu), ag_gemm shapes.
      for w in $WORLDS; do
        [ "$w" -le "$GPUS" ] || continue
        stage "cutlass_W$w" 600 "$BUILD/tpgemm-cutlass-distgemm" --gpus "$w" --shapes bench/shapes.txt \
          --json "$LOGS/cutlass_W$w.json"
        rows_to_summary "cutlass_W$w" "^ag "
      done ;;
    *) note "unknown stage $s" ;;
  esac
done
# Where the performance targets stand (bench/compare.py), at each world size that has both the
# bench and the peers of this call: compare_W*.md, and its verdict lines in the summary.
for w in $WORLDS; do
  [ -f "$LOGS/bench_W$w.json" ] && [ -f "$LOGS/peers_W$w.json" ] || continue
  ar=$LOGS/peers_ar_W$w.json
  [ -f "$ar" ] || ar=
  cutlass=()
  [ -s "$LOGS/cutlass_W$w.json" ] && cutlass=(--cutlass "$LOGS/cutlass_W$w.json")
  python3 bench/compare.py "$LOGS/bench_W$w.json" "$LOGS/peers_W$w.json" $ar "${cutlass[@]}" > "$LOGS/compare_W$w.md" 2>&1 &&
    grep -E '^- W=' "$LOGS/compare_W$w.md" | tee -a "$SUMMARY" > /dev/null
done
note "done $(date -u '+%H:%M:%S UTC')"
pack
# The tables, for a reader of the last lines of output.
for f in "$LOGS"/gemm_core.log "$LOGS"/bench_W*.log "$LOGS"/peers_W*.log "$LOGS"/peers_ar_W*.log; do
  [ -f "$f" ] && { echo "== $f"; grep -v '^\s*$' "$f" | tail -80; }
done
cat "$SUMMARY"
