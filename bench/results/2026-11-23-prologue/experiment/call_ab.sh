#!/usr/bin/env bash
# Thirteenth session, on nvidia-h200-x2: the tree with the one-load prologue (NOTE [one-load
# prologue] in src/ops/allreduce/allreduce_device.cuh) through the W=2 suite beside the peers;
# then the all-reduce and gemm_ar rows timed with that tree and with the tree before it (a copy
# with .carry/exp/prologue.diff, `git diff` of the change, reversed), in turn: old, new, old, new.
set -u
ROOT=$(pwd); R=$ROOT/gpu-results; OLD=/tmp/tpgemm-old
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STAGES=${STAGES:-info build test_gpu test_dist bench peers}
# shellcheck disable=SC2086
DEADLINE=${DEADLINE:-330} WORLDS=2 scripts/gpu_check.sh $STAGES > /dev/null
mkdir -p $R/ab $OLD
tar cf - --exclude=./build-gpu --exclude=./gpu-results --exclude=./.carry . | (cd $OLD && tar xf -)
(cd $OLD && patch -R -p1 < $ROOT/.carry/exp/prologue.diff && export TPGEMM_CUTLASS_DIR=$ROOT/.carry/cutlass/include &&
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build -j "$(nproc)" --target tpgemm-bench) \
  > $R/ab/build_old.log 2>&1 || echo "old tree: build failed (ab/build_old.log)"
for round in 1 2; do
  for tree in old new; do
    B=$ROOT/build-gpu/tpgemm-bench; [ $tree = old ] && B=$OLD/build/tpgemm-bench
    timeout 120 $B --gpus 2 --op allreduce,gemm_ar --check --json $R/ab/${tree}_$round.json > $R/ab/${tree}_$round.log 2>&1
    echo "$tree round $round rc=$?"
  done
done
tar czf $OUT/results.tgz -C $R .
cat $R/summary.txt
for f in $R/ab/*_[12].log; do echo "== $f"; grep -E '^allreduce|^ *[0-9]+ .*us|^gemm_ar' $f | head -60; done
