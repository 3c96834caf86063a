# CUTLASS 3.x / CuTe headers for the Hopper GEMM core (src/gemm/sm90): header-only, from the
# nvidia-cutlass wheel (scripts/setup.sh installs it). TPGEMM_CUTLASS_DIR is the include
# directory holding cutlass/ and cute/; first found of: the variable or environment variable,
# .carry/cutlass/include (copied there by scripts/carry_cutlass.sh for machines without
# network), the installed Python package cutlass_library.
set(TPGEMM_CUTLASS_DIR "$ENV{TPGEMM_CUTLASS_DIR}" CACHE PATH "CUTLASS include directory (holds cutlass/ and cute/)")
if(NOT TPGEMM_CUTLASS_DIR)
  if(EXISTS "${PROJECT_SOURCE_DIR}/.carry/cutlass/include/cutlass/cutlass.h")
    set(_cutlass "${PROJECT_SOURCE_DIR}/.carry/cutlass/include")
  else()
    # find_spec locates the package without importing it (its Python dependencies may be absent).
    execute_process(
      COMMAND python3 -c "import importlib.util, os; s = importlib.util.find_spec('cutlass_library'); print(os.path.join(list(s.submodule_search_locations)[0], 'source', 'include') if s else '')"
      OUTPUT_VARIABLE _cutlass OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  endif()
  if(_cutlass)
    set(TPGEMM_CUTLASS_DIR "${_cutlass}" CACHE PATH "CUTLASS include directory (holds cutlass/ and cute/)" FORCE)
  endif()
endif()
if(NOT EXISTS "${TPGEMM_CUTLASS_DIR}/cutlass/cutlass.h" OR NOT EXISTS "${TPGEMM_CUTLASS_DIR}/cute/tensor.hpp")
  message(FATAL_ERROR "tpgemm needs the CUTLASS 3.x headers (cutlass/ and cute/) for its Hopper GEMM core and did not "
    "find them (TPGEMM_CUTLASS_DIR='${TPGEMM_CUTLASS_DIR}'). Run scripts/setup.sh (it pip-installs nvidia-cutlass), "
    "or set TPGEMM_CUTLASS_DIR to an include directory holding cutlass/ and cute/.")
endif()
file(STRINGS "${TPGEMM_CUTLASS_DIR}/cutlass/version.h" _cutlass_v REGEX "#define CUTLASS_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*CUTLASS_MAJOR ([0-9]+).*CUTLASS_MINOR ([0-9]+).*CUTLASS_PATCH ([0-9]+).*" "\\1.\\2.\\3"
       TPGEMM_CUTLASS_VERSION "${_cutlass_v}")
if(TPGEMM_CUTLASS_VERSION VERSION_LESS 4.0)
  message(FATAL_ERROR "tpgemm's GEMM core is written for CUTLASS >= 4.0 (tested with 4.2); found ${TPGEMM_CUTLASS_VERSION} in ${TPGEMM_CUTLASS_DIR}")
endif()
message(STATUS "CUTLASS ${TPGEMM_CUTLASS_VERSION}: ${TPGEMM_CUTLASS_DIR}")

# cuobjdump (with nvdisasm) proves the core's kernels use wgmma (tests/check_hgmma.sh). The CUDA
# toolkit may lack them; scripts/setup.sh then installs NVIDIA's wheels, carry_cutlass.sh carries them.
execute_process(
  COMMAND python3 -c "import importlib.util, os; s = importlib.util.find_spec('nvidia'); print(';'.join(os.path.join(p, 'cu13', 'bin') for p in s.submodule_search_locations) if s else '')"
  OUTPUT_VARIABLE _nvidia_bins OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
set(_tool_hints "${PROJECT_SOURCE_DIR}/.carry/bin" ${CUDAToolkit_BIN_DIR} ${_nvidia_bins})
find_program(TPGEMM_CUOBJDUMP cuobjdump HINTS ${_tool_hints})
find_program(TPGEMM_NVDISASM nvdisasm HINTS ${_tool_hints})
