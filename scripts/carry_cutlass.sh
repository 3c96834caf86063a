#!/usr/bin/env bash
# For a GPU machine without network: copies the CUTLASS include tree (cutlass/ and cute/ only,
# about 27 MiB) into .carry/cutlass/include, where CMake looks first after TPGEMM_CUTLASS_DIR,
# and cuobjdump with nvdisasm (the wgmma check) into .carry/bin. .carry/ is git-ignored: carry it
# with the work tree (e.g. the device tool's carry: [".carry"]). Run scripts/setup.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
py_pkg() { python3 -c "import importlib.util as u; s = u.find_spec('$1'); print(list(s.submodule_search_locations)[0] if s else '')" 2>/dev/null || true; }
src=${TPGEMM_CUTLASS_DIR:-$(py_pkg cutlass_library)/source/include}
[ -f "$src/cutlass/cutlass.h" ] && [ -f "$src/cute/tensor.hpp" ] ||
  { echo "carry_cutlass: no CUTLASS headers at '$src': run scripts/setup.sh (or set TPGEMM_CUTLASS_DIR)" >&2; exit 1; }
rm -rf .carry/cutlass
mkdir -p .carry/cutlass/include .carry/bin
cp -r "$src/cutlass" "$src/cute" .carry/cutlass/include/
for tool in cuobjdump nvdisasm; do
  for p in "$(command -v "$tool" || true)" "/usr/local/cuda/bin/$tool" "$(py_pkg nvidia)/cu13/bin/$tool"; do
    [ -n "$p" ] && [ -x "$p" ] && [ "$p" != "$PWD/.carry/bin/$tool" ] && { cp "$p" .carry/bin/; break; }
  done
  [ -x ".carry/bin/$tool" ] || echo "carry_cutlass: $tool not found: the GPU machine's own, if any, will be used"
done
echo "carry_cutlass: .carry holds $(du -sh .carry | cut -f1) (CUTLASS $(grep -h '#define CUTLASS_M[AI]' .carry/cutlass/include/cutlass/version.h | awk '{printf "%s%s", sep, $3; sep="."}'))"
