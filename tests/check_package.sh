#!/usr/bin/env bash
# tpgemm as an installed package (ctest Package.InstallAndUse): installs this build's component
# cpp into a prefix inside the build tree, builds tests/package against it with find_package and
# with pkg-config, and runs both. Only links the installed libraries: nothing of tpgemm compiles again.
# Usage: check_package.sh CMAKE GENERATOR MAKE_PROGRAM CXX CUDA_ROOT TPGEMM_BUILD WORK_DIR VERSION
set -euo pipefail
cmake=$1 generator=$2 make_program=$3 cxx=$4 cuda_root=$5 build=$6 work=$7 version=$8
here=$(cd "$(dirname "$0")" && pwd)
src_root=$(dirname "$here")
prefix=$work/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
echo "== install $build (component cpp) into $prefix"
"$cmake" --install "$build" --prefix "$prefix" --component cpp >"$work/install.log" || { cat "$work/install.log"; fail "install"; }
find "$prefix" -type f | sed "s|^$prefix/||" | sort
for f in include/tpgemm/tpgemm.h include/tpgemm/version.h; do [ -f "$prefix/$f" ] || fail "$f not installed"; done
config=$(find "$prefix" -path '*/cmake/tpgemm/tpgemmConfig.cmake')
pc=$(find "$prefix" -path '*/pkgconfig/tpgemm.pc')
{ [ -n "$config" ] && [ -f "$(dirname "$config")/tpgemmConfigVersion.cmake" ]; } || fail "no CMake package"
[ -n "$pc" ] || fail "no tpgemm.pc"
for l in tpgemm tpgemm_host tpgemm_sm90_kernels; do
  [ -f "$(dirname "$pc")/../lib$l.a" ] || fail "lib$l.a not installed"
done
# The installed targets must not point into the source or build tree (src/ is the build's only).
if grep -n -F -e "$src_root" -e "$build" "$(dirname "$config")"/tpgemmTargets*.cmake; then
  fail "the exported targets name the source or build tree"
fi

echo "== find_package(tpgemm) from tests/package"
"$cmake" -S "$here/package" -B "$work/cmake-build" -G "$generator" -DCMAKE_MAKE_PROGRAM="$make_program" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCUDAToolkit_ROOT="$cuda_root" >"$work/configure.log" || { cat "$work/configure.log"; fail "configure"; }
"$cmake" --build "$work/cmake-build" >"$work/build.log" || { cat "$work/build.log"; fail "build"; }
out=$("$work/cmake-build/tpgemm_package_test") || { echo "$out"; fail "tpgemm_package_test"; }
echo "$out"
[ "$(head -1 <<<"$out")" = "tpgemm $version" ] || fail "version: expected tpgemm $version"

echo "== pkg-config tpgemm"
if ! command -v pkg-config >/dev/null; then
  echo "pkg-config not found: tpgemm.pc not checked (scripts/setup.sh installs pkg-config)"
  exit 0
fi
PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_PATH
pkg-config --cflags --libs tpgemm
[ "$(pkg-config --modversion tpgemm)" = "$version" ] || fail "tpgemm.pc: version $(pkg-config --modversion tpgemm)"
# The same program, compiled and linked with the .pc's flags alone.
# shellcheck disable=SC2046
"$cxx" -std=c++17 -o "$work/pc_test" "$here/package/main.cpp" $(pkg-config --cflags --libs tpgemm)
# No rpath in the .pc: the run finds NCCL and the CUDA runtime through its -L directories.
libdirs=$(pkg-config --libs-only-L tpgemm | sed -e 's/-L//g' -e 's/ *$//' | tr ' ' ':')
out=$(LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$work/pc_test") || { echo "$out"; fail "pc_test"; }
echo "$out"
[ "$(head -1 <<<"$out")" = "tpgemm $version" ] || fail "pkg-config build: version"
echo "OK"
