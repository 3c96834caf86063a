# Sourced by the SASS checks (check_hgmma.sh, check_no_param_copy.sh): the one place that finds
# the tools and disassembles the built libraries.
#   sass_dump CUOBJDUMP NVDISASM OUT LIBRARY...   writes every library's SASS to OUT
# Exits 77 (ctest: skipped, saying why) where cuobjdump or nvdisasm is missing; any cuobjdump
# failure fails the caller (set -e).
sass_dump() {
  local cuobjdump=$1 nvdisasm=$2 out=$3 tool lib
  shift 3
  for tool in "$cuobjdump" "$nvdisasm"; do
    [ -x "$tool" ] || { echo "SKIPPED: cuobjdump and nvdisasm are needed ('$tool' is not executable); scripts/setup.sh installs them"; exit 77; }
  done
  : > "$out"
  for lib in "$@"; do
    PATH="$(dirname "$nvdisasm"):$PATH" "$cuobjdump" -sass "$lib" >> "$out"  # cuobjdump runs nvdisasm from PATH
  done
}
