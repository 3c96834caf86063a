#!/usr/bin/env bash
# Proves without a GPU that the symmetric collectives' kernels (one-shot, two-shot, all-gather and
# fused gemm_ar's decode kernel) do not copy their parameters into local memory, which ptxas does
# in every thread, before anything else, when a generic pointer to a parameter escapes into a call
# (NOTE [one-load prologue] in src/ops/allreduce/allreduce_device.cuh). Such a copy is 13 to
# hundreds of local stores and loads (STL/LDL) per kernel; a kernel may keep a few for spills.
# Prints one line per kernel: its STL/LDL count and its name. EXPECTED_KERNELS: how many
# instances the libraries must hold (so that a kernel renamed or left out is not passed unseen).
#   check_no_param_copy.sh CUOBJDUMP NVDISASM EXPECTED_KERNELS LIBRARY...
# Exits 77 (ctest: skipped, saying why) where cuobjdump or nvdisasm is missing.
set -euo pipefail
source "$(dirname "$0")/sass_dump.sh"
cuobjdump=$1 nvdisasm=$2 expected=$3
shift 3
max_local=4
sass=$(mktemp)
trap 'rm -f "$sass"' EXIT
sass_dump "$cuobjdump" "$nvdisasm" "$sass" "$@"
report=$(awk '
  /Function :/ { f = $3; if (f ~ /(oneshot|twoshot|allgather|fused_decode)_kernel/) { order[++n] = f; count[f] = 0 } next }
  /STL|LDL/ && (f in count) { count[f]++ }
  END { for (i = 1; i <= n; i++) printf "%6d  %s\n", count[order[i]], order[i] }' "$sass")
printf '%s\n' "$report"
kernels=$(printf '%s\n' "$report" | grep -c . || true)
over=$(printf '%s\n' "$report" | awk -v m=$max_local 'NF && $1 > m' | wc -l)
[ "$kernels" -eq "$expected" ] || { echo "FAIL: expected $expected symmetric-collective kernels in $*, found $kernels"; exit 1; }
[ "$over" -eq 0 ] || { echo "FAIL: $over of $kernels kernel(s) with more than $max_local STL/LDL: a copy of their parameters"; exit 1; }
echo "PASS: none of the $kernels symmetric-collective kernels copies its parameters into local memory"
