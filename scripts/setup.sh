#!/usr/bin/env bash
# Installs what building tpgemm needs, where it is missing: CMake, Ninja, a C++20 compiler,
# GoogleTest (Debian packages). The CUDA toolkit (nvcc, cuBLASLt) and NCCL >= 2.28 with
# nccl_device.h must already be installed (NCCL_HOME points elsewhere if needed).
set -euo pipefail
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v ninja >/dev/null || need+=(ninja-build)
command -v g++ >/dev/null || need+=(g++)
[ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ] || need+=(libgtest-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo sudo)
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}"
fi
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] ||
  { echo "setup: nvcc not found: install the CUDA toolkit (13.0) first" >&2; exit 1; }
