#!/usr/bin/env bash
# Set up and run the tests: installs what is missing (Debian packages), builds everything with
# CMake, and runs every test ctest finds. Without GPUs the gpu and dist tests are skipped, each
# saying why; with them, they run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD" -j "$(nproc)"
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" --timeout 1500
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "No GPU on this machine: the gpu and dist tests above were skipped ($(ctest --test-dir "$BUILD" -N -L 'gpu|dist' | tail -1))."
  echo "What each of them says: $("$BUILD/tests/tpgemm_gpu_tests" --gtest_filter='LtMatmul.*' 2>&1 | grep -m1 -o 'needs .*')"
fi
