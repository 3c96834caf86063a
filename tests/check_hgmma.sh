#!/usr/bin/env bash
# Proves without a GPU that the GEMM core's kernels are wgmma kernels: disassembles the library
# and requires HGMMA (the SASS of wgmma.mma_async) in every CUTLASS kernel, and the expected
# number of kernels. Prints one line per kernel: its HGMMA count, the distinct HGMMA shapes, its name.
#   check_hgmma.sh CUOBJDUMP NVDISASM LIBRARY EXPECTED_KERNELS
# Exits 77 (ctest: skipped, saying why) where cuobjdump or nvdisasm is missing.
set -euo pipefail
source "$(dirname "$0")/sass_dump.sh"
lib=$3 expected=$4
sass=$(mktemp)
trap 'rm -f "$sass"' EXIT
sass_dump "$1" "$2" "$sass" "$lib"
# Per function: HGMMA count and shapes. CUTLASS kernels are instances of cutlass::device_kernel.
report=$(awk '
  /Function :/ { f = $3; if (f ~ /device_kernel/) { order[++n] = f; count[f] = 0; shapes[f] = "" } next }
  /HGMMA/ && (f in count) {
    count[f]++
    match($0, /HGMMA[.A-Za-z0-9x]*/); op = substr($0, RSTART, RLENGTH)
    if (index(" " shapes[f] " ", " " op " ") == 0) shapes[f] = shapes[f] (shapes[f] == "" ? "" : " ") op
  }
  END {
    for (i = 1; i <= n; i++) {
      f = order[i]
      printf "%6d  %-26s %-10s %s\n", count[f], shapes[f], (f ~ /StreamK/ ? "stream-K" : "persistent"), f
    }
  }' "$sass")
kernels=$(printf '%s\n' "$report" | grep -c . || true)
without=$(printf '%s\n' "$report" | awk 'NF && $1 == 0' | wc -l)
# c++filt gives up on these names: read the configuration out of the mangled name instead
# (operand majors: 0 = K-major, 1 = M/N-major; the warp group's wgmma tile tells the CTA tile).
printf '%s\n' "$report" | sed -E 's/ _Z.*MainloopSm90TmaGmmaWarpSpecializedILi([0-9]+)E.*KernelTmaWarpSpecialized(Cooperative|Pingpong).*(MMA_[0-9x]+_F32[A-Z0-9]+)_SSILN[A-Z0-9_]+MajorE([01])EL[A-Z0-9_]+_([01])E.*$/ \2 \3 A-major=\4 B-major=\5 stages=\1/'
echo "kernels: $kernels (expected $expected), without HGMMA: $without, HGMMA instructions in all: $(grep -c HGMMA "$sass" || true)"
[ "$kernels" -eq "$expected" ] || { echo "FAIL: expected $expected CUTLASS kernels in $lib"; exit 1; }
[ "$without" -eq 0 ] || { echo "FAIL: $without kernel(s) without HGMMA: they do not use wgmma"; exit 1; }
echo "PASS: every GEMM core kernel uses wgmma"
