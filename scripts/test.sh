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
ctest --test-dir "$BUILD" -N -L 'gpu|dist' | tail -1
