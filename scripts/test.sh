#!/usr/bin/env bash
# Set up and run the tests: installs what is missing (Debian packages), builds everything with
# CMake, and runs every test ctest finds. Without GPUs the gpu and dist tests are skipped, each
# saying why; with them, they run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
BUILD=${BUILD:-build}
PIP_FLAGS=()
python3 -m pip install --help 2>/dev/null | grep -q -- --break-system-packages && PIP_FLAGS+=(--break-system-packages)
# One build tree for everything, compiled once: pip builds the Python module through
# scikit-build-core (pyproject.toml) in $BUILD together with the tools and the tests, and installs
# the package.
python3 -m pip install --no-deps --no-build-isolation "${PIP_FLAGS[@]}" . -Cbuild-dir="$BUILD" -Cbuild.targets=all \
  -Ccmake.define.TPGEMM_BUILD_TESTS=ON -Cbuild.verbose=true
ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" --timeout 1500
# The Python tests from outside the source tree, so that they import the installed package.
(cd "$BUILD" && python3 -m pytest -v -rs "$OLDPWD/tests/python")
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "No GPU on this machine: the gpu and dist tests above were skipped ($(ctest --test-dir "$BUILD" -N -L 'gpu|dist' | tail -1))."
  echo "What each of them says: $("$BUILD/tests/tpgemm_gpu_tests" --gtest_filter='LtMatmul.*' 2>&1 | grep -m1 -o 'needs .*')"
fi
