#!/usr/bin/env bash
# Set up, build and run the main job: tpgemm-bench on every local GPU over the shared shape set,
# checked against a reference. Extra flags go to tpgemm-bench (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD:-build}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTPGEMM_BUILD_TESTS=OFF
cmake --build "$BUILD" -j "$(nproc)" --target tpgemm-bench
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
exec "$BUILD/tpgemm-bench" --check "$@"
