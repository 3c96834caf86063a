#!/usr/bin/env bash
# Installs what building tpgemm needs, where it is missing: CMake, Ninja, a C++20 compiler,
# GoogleTest, pkg-config (the package test reads tpgemm.pc) (Debian packages); the CUTLASS 3.x
# headers of the Hopper GEMM core, and cuobjdump with nvdisasm for its wgmma check (NVIDIA's PyPI
# wheels, headers and binaries only: --no-deps).
# The CUDA toolkit (nvcc, cuBLASLt) and NCCL >= 2.28 with nccl_device.h must already be
# installed (NCCL_HOME points elsewhere if needed). Offline machines get the CUTLASS headers and
# the two tools in .carry/ (scripts/carry_cutlass.sh) and need nothing from here.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ] || need+=(libgtest-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}"
fi
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  { echo "setup: nvcc not found: install the CUDA toolkit (13.0) first" >&2; exit 1; }

# Where an installed Python package lives ('' if it is not), without importing it.
py_pkg() { python3 -c "import importlib.util as u; s = u.find_spec('$1'); print(list(s.submodule_search_locations)[0] if s else '')" 2>/dev/null || true; }
pip_install() {
  python3 -m pip install -q --no-deps "$@" 2>/dev/null || python3 -m pip install -q --no-deps --break-system-packages "$@"
}
# The versions the GEMM core was written and checked with (CUTLASS 4.2; cuobjdump 13.2 is the
# oldest 13.x wheel and reads CUDA 13.0's sm_90a code).
CUTLASS_WHEEL=nvidia-cutlass==4.2.0.0
TOOL_WHEELS=(nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51)
if ! { [ -f "${TPGEMM_CUTLASS_DIR:-/nonexistent}/cutlass/cutlass.h" ] || [ -f .carry/cutlass/include/cutlass/cutlass.h ] ||
       [ -f "$(py_pkg cutlass_library)/source/include/cutlass/cutlass.h" ]; }; then
  echo "setup: installing $CUTLASS_WHEEL (CUTLASS headers)"
  pip_install "$CUTLASS_WHEEL"
fi
# The Python package: nanobind and scikit-build-core build tpgemm._C (pip install . without build
# isolation, so that machines without network build with what they have); pytest runs the tests,
# and torch (from PyPI, which imports on machines without a GPU) the torch layer's CPU tests:
# torch 2.11, the version the GPU checks run, whose libnccl (2.28, which the process loads with
# torch) is the NCCL minor tpgemm is built against; a later torch brings another NCCL minor, whose
# device ABI tpgemm refuses (Team creation says so). TPGEMM_NO_TORCH=1 skips torch: those tests
# then skip, saying so.
TORCH_WHEEL=torch==2.11.0
py_has() { python3 -c "import $1" >/dev/null 2>&1; }
py_need=()
py_has nanobind || py_need+=(nanobind==3.1.0)
py_has scikit_build_core || py_need+=(scikit-build-core==1.1.0)
py_has pytest || py_need+=(pytest)
if [ ${#py_need[@]} -gt 0 ]; then
  echo "setup: installing ${py_need[*]}"
  pip_install "${py_need[@]}" pathspec packaging iniconfig pluggy
fi
if [ "${TPGEMM_NO_TORCH:-0}" != 1 ] && ! py_has torch; then
  echo "setup: installing $TORCH_WHEEL (the torch layer's tests)"
  python3 -m pip install -q "$TORCH_WHEEL" 2>/dev/null || python3 -m pip install -q --break-system-packages "$TORCH_WHEEL"
fi
have_tool() {
  command -v "$1" >/dev/null || [ -x "/usr/local/cuda/bin/$1" ] || [ -x ".carry/bin/$1" ] ||
    { [ -n "$(py_pkg nvidia)" ] && [ -x "$(py_pkg nvidia)/cu13/bin/$1" ]; }
}
if ! have_tool cuobjdump || ! have_tool nvdisasm; then
  echo "setup: installing ${TOOL_WHEELS[*]} (cuobjdump and nvdisasm)"
  pip_install "${TOOL_WHEELS[@]}"
fi
