# Options whose defaults follow what this machine has. Forcing one on without its dependency
# is a configure error that says how to get the dependency.
include(CheckLanguage)

# Every dependency is detected here, and nowhere else; the folders' CMakeLists.txt only use
# what this file found.
option(REMAT_WERROR "Treat warnings as errors" OFF)
option(REMAT_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)

# --- libFuzzer targets (fuzz/, docs/fuzzing.md) -------------------------------------------------
# They need clang's libFuzzer (Debian 12: clang and libclang-rt-14-dev); the whole project is then
# compiled with coverage and AddressSanitizer + UndefinedBehaviorSanitizer (CMakeLists.txt).
option(REMAT_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (clang only; instruments the whole build)" OFF)
if(REMAT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "REMAT_BUILD_FUZZERS=ON needs clang (libFuzzer), not ${CMAKE_CXX_COMPILER_ID}: "
                        "apt-get install clang libclang-rt-14-dev and configure with -DCMAKE_CXX_COMPILER=clang++ "
                        "(scripts/fuzz.sh does), or configure with -DREMAT_BUILD_FUZZERS=OFF")
  endif()
  include(CheckCXXSourceCompiles)
  set(CMAKE_REQUIRED_FLAGS "-fsanitize=fuzzer,address,undefined")
  set(CMAKE_REQUIRED_LINK_OPTIONS "-fsanitize=fuzzer,address,undefined")
  check_cxx_source_compiles(
    "#include <cstddef>\n#include <cstdint>\nextern \"C\" int LLVMFuzzerTestOneInput(const std::uint8_t*, std::size_t) { return 0; }"
    REMAT_LIBFUZZER_LINKS)
  unset(CMAKE_REQUIRED_FLAGS)
  unset(CMAKE_REQUIRED_LINK_OPTIONS)
  if(NOT REMAT_LIBFUZZER_LINKS)
    message(FATAL_ERROR "REMAT_BUILD_FUZZERS=ON but clang cannot link -fsanitize=fuzzer,address,undefined: "
                        "apt-get install libclang-rt-14-dev, or configure with -DREMAT_BUILD_FUZZERS=OFF")
  endif()
endif()

# --- Always needed ------------------------------------------------------------------------------
find_package(nlohmann_json 3.10 REQUIRED)

# --- oneDNN + OpenMP: the CPU backend's kernels (required) ------------------------------------
# The CPU executor is a core feature, so there is no build without it. Debian's libdnnl-dev (2.6)
# uses the OpenMP threading runtime, which GCC's libgomp provides. The library and headers are
# looked up directly: Debian's dnnl-config.cmake also demands OpenCL's development files, which a
# CPU build does not use. Elsewhere (the lent GPU machine) pass -DREMAT_DNNL_ROOT=<an unpacked
# libdnnl-dev, libdnnl2> (docs/gpu.md).
set(REMAT_DNNL_ROOT "" CACHE PATH "Prefix of oneDNN 2.6 (include/oneapi/dnnl, lib) when it is not in /usr")
find_path(REMAT_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp HINTS "${REMAT_DNNL_ROOT}/usr/include" "${REMAT_DNNL_ROOT}/include")
find_library(REMAT_DNNL_LIBRARY NAMES dnnl libdnnl.so.2
             HINTS "${REMAT_DNNL_ROOT}/usr/lib/x86_64-linux-gnu" "${REMAT_DNNL_ROOT}/lib/x86_64-linux-gnu"
                   "${REMAT_DNNL_ROOT}/lib")
if(NOT REMAT_DNNL_INCLUDE_DIR OR NOT REMAT_DNNL_LIBRARY)
  message(FATAL_ERROR "oneDNN 2.6 was not found (the CPU backend needs it): apt-get install libdnnl-dev, "
                      "or pass -DREMAT_DNNL_ROOT=<prefix>  (header: '${REMAT_DNNL_INCLUDE_DIR}', "
                      "library: '${REMAT_DNNL_LIBRARY}')")
endif()
file(STRINGS "${REMAT_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_version.h" _remat_dnnl_version_lines
     REGEX "#define DNNL_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" REMAT_DNNL_VERSION
       "${_remat_dnnl_version_lines}")
if(REMAT_DNNL_VERSION VERSION_LESS 2.6 OR REMAT_DNNL_VERSION VERSION_GREATER_EQUAL 3.0)
  message(FATAL_ERROR "oneDNN ${REMAT_DNNL_VERSION} at '${REMAT_DNNL_INCLUDE_DIR}': the CPU backend uses the 2.x API "
                      "(2.6 or later): apt-get install libdnnl-dev (Debian 12 has 2.6.3)")
endif()
file(STRINGS "${REMAT_DNNL_INCLUDE_DIR}/oneapi/dnnl/dnnl_config.h" _remat_dnnl_runtime
     REGEX "#define DNNL_CPU_THREADING_RUNTIME ")
if(NOT _remat_dnnl_runtime MATCHES "DNNL_RUNTIME_OMP")
  message(FATAL_ERROR "oneDNN at '${REMAT_DNNL_INCLUDE_DIR}' is not built for OpenMP threads "
                      "(${_remat_dnnl_runtime}); the CPU backend sets its thread count through OpenMP: "
                      "install Debian's libdnnl-dev")
endif()
add_library(remat_dnnl INTERFACE)
target_include_directories(remat_dnnl SYSTEM INTERFACE "${REMAT_DNNL_INCLUDE_DIR}")
target_link_libraries(remat_dnnl INTERFACE "${REMAT_DNNL_LIBRARY}")
find_package(OpenMP QUIET COMPONENTS CXX)
if(NOT OpenMP_CXX_FOUND)
  message(FATAL_ERROR "OpenMP for C++ was not found (the CPU backend's own kernels and oneDNN share its threads): "
                      "apt-get install build-essential (GCC's libgomp)")
endif()

# --- GoogleTest: the test suite -----------------------------------------------------------------
option(REMAT_BUILD_TESTS "Build the GoogleTest suite" ON)
if(REMAT_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "REMAT_BUILD_TESTS=ON but GoogleTest was not found: apt-get install googletest "
                        "libgtest-dev libgmock-dev, or configure with -DREMAT_BUILD_TESTS=OFF")
  endif()
  include(GoogleTest)
endif()

# --- Google Benchmark: the benchmarks (on when found) -------------------------------------------
find_package(benchmark QUIET)
set(REMAT_BUILD_BENCHMARKS ${benchmark_FOUND} CACHE BOOL "Build the Google Benchmark programs (default: on when Google Benchmark is found)")
if(REMAT_BUILD_BENCHMARKS AND NOT benchmark_FOUND)
  message(FATAL_ERROR "REMAT_BUILD_BENCHMARKS=ON but Google Benchmark was not found: apt-get install "
                      "libbenchmark-dev, or configure with -DREMAT_BUILD_BENCHMARKS=OFF")
endif()

# --- Qt 6 GUI ---------------------------------------------------------------------------------
# Qt6Charts' package config needs Qt6OpenGL (libqt6opengl6-dev) and Qt6Gui wants XKB
# (libxkbcommon-dev): a missing one hides the whole GUI, so name each missing part.
find_package(Qt6 6.4 QUIET COMPONENTS Widgets Charts Svg Test)
set(_remat_qt_missing)
foreach(_remat_qt_part IN ITEMS Widgets Charts Svg Test)
  if(NOT Qt6${_remat_qt_part}_FOUND)
    list(APPEND _remat_qt_missing Qt6${_remat_qt_part})
  endif()
endforeach()
if(Qt6_FOUND AND NOT _remat_qt_missing)
  set(_remat_gui_default ON)
else()
  set(_remat_gui_default OFF)
endif()
set(REMAT_BUILD_GUI ${_remat_gui_default} CACHE BOOL "Build the Qt 6 explorer (default: on when Qt 6 Widgets, Charts, Svg and Test are found)")
if(REMAT_BUILD_GUI AND NOT _remat_gui_default)
  if(NOT _remat_qt_missing)
    set(_remat_qt_missing Qt6)
  endif()
  list(JOIN _remat_qt_missing ", " _remat_qt_missing_text)
  message(FATAL_ERROR
    "REMAT_BUILD_GUI=ON but these parts of Qt 6.4 were not found: ${_remat_qt_missing_text}.\n"
    "Install every package the build needs with scripts/setup-deps.sh (as root), or by hand:\n"
    "  apt-get install qt6-base-dev qt6-charts-dev libqt6svg6-dev libqt6opengl6-dev libxkbcommon-dev libgl-dev\n"
    "(the messages above say which dependency stopped Qt's own package config), "
    "or configure with -DREMAT_BUILD_GUI=OFF.")
endif()

# --- CLI11: the `remat` command line ----------------------------------------------------------
# Where it is missing (the lent GPU machine has no network) the rest still builds: the library,
# the tests and the GPU check's own driver.
find_package(CLI11 QUIET)
set(REMAT_BUILD_CLI ${CLI11_FOUND} CACHE BOOL "Build the remat command line (default: on when CLI11 is found)")
if(REMAT_BUILD_CLI AND NOT CLI11_FOUND)
  message(FATAL_ERROR "REMAT_BUILD_CLI=ON but CLI11 was not found: apt-get install libcli11-dev, "
                      "or configure with -DREMAT_BUILD_CLI=OFF")
endif()

# --- ONNX + protobuf: the ONNX importer (remat::onnx, `remat import`, .onnx wherever a chain is) --
# ONNX's own protobuf classes parse the model; Debian's libonnx-dev exports the targets onnx_proto
# and onnx without a namespace, and onnx_proto links protobuf::libprotobuf, so protobuf comes first.
find_package(Protobuf QUIET)
if(Protobuf_FOUND)
  find_package(ONNX QUIET)
endif()
if(Protobuf_FOUND AND ONNX_FOUND AND TARGET onnx_proto)
  set(_remat_onnx_default ON)
else()
  set(_remat_onnx_default OFF)
endif()
set(REMAT_WITH_ONNX ${_remat_onnx_default} CACHE BOOL "Build the ONNX importer (default: on when ONNX and protobuf are found)")
if(REMAT_WITH_ONNX AND NOT _remat_onnx_default)
  message(FATAL_ERROR "REMAT_WITH_ONNX=ON but ONNX's protobuf classes or protobuf were not found: apt-get install "
                      "libonnx-dev libprotobuf-dev protobuf-compiler, or configure with -DREMAT_WITH_ONNX=OFF (then "
                      "the tools refuse .onnx files and say why)")
endif()

# --- CUDA + cuDNN + cuBLAS --------------------------------------------------------------------
if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER)  # a versioned install without the /usr/local/cuda link
  file(GLOB _remat_nvcc_candidates /usr/local/cuda-1*/bin/nvcc)
  if(_remat_nvcc_candidates)
    list(SORT _remat_nvcc_candidates ORDER DESCENDING)
    list(GET _remat_nvcc_candidates 0 CMAKE_CUDA_COMPILER)
  endif()
endif()
check_language(CUDA)
find_package(CUDAToolkit QUIET)
find_package(CUDNN 9 QUIET)  # cmake/FindCUDNN.cmake
if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND CUDNN_FOUND)
  set(_remat_cuda_default ON)
else()
  set(_remat_cuda_default OFF)
endif()
set(REMAT_WITH_CUDA ${_remat_cuda_default} CACHE BOOL "Build the CUDA + cuDNN executor (default: on when nvcc, the CUDA toolkit and cuDNN are found)")
if(REMAT_WITH_CUDA AND NOT _remat_cuda_default)
  message(FATAL_ERROR
    "REMAT_WITH_CUDA=ON but the CUDA toolkit (nvcc, cuBLAS) and cuDNN 9 were not all found\n"
    "  nvcc: '${CMAKE_CUDA_COMPILER}'  cudnn.h: '${CUDNN_INCLUDE_DIR}'  libcudnn: '${CUDNN_LIBRARY}'\n"
    "Install CUDA 13 and cuDNN 9 under /usr/local/cuda (or pass -DCUDAToolkit_ROOT=... "
    "-DCUDNN_INCLUDE_DIR=... -DCUDNN_LIBRARY=...), or configure with -DREMAT_WITH_CUDA=OFF.")
endif()

# --- What this configuration builds -----------------------------------------------------------
function(_remat_part_line label built why_not)
  if(built)
    message(STATUS "  ${label}: yes")
  else()
    message(STATUS "  ${label}: no (${why_not})")
  endif()
endfunction()
message(STATUS "Remat Explorer ${PROJECT_VERSION}: GUI=${REMAT_BUILD_GUI} CUDA=${REMAT_WITH_CUDA} ONNX=${REMAT_WITH_ONNX} CLI=${REMAT_BUILD_CLI} "
               "tests=${REMAT_BUILD_TESTS} benchmarks=${REMAT_BUILD_BENCHMARKS} fuzzers=${REMAT_BUILD_FUZZERS}")
message(STATUS "  core (model, simulator, planners, files, zoo, CPU executor on oneDNN ${REMAT_DNNL_VERSION}): yes")
_remat_part_line("remat command line" "${REMAT_BUILD_CLI}" "CLI11 not found or REMAT_BUILD_CLI=OFF")
_remat_part_line("explorer (Qt 6 GUI)" "${REMAT_BUILD_GUI}" "REMAT_BUILD_GUI=OFF")
_remat_part_line("ONNX importer" "${REMAT_WITH_ONNX}" "libonnx-dev or libprotobuf-dev not found, or REMAT_WITH_ONNX=OFF")
_remat_part_line("GPU executor (CUDA + cuDNN)" "${REMAT_WITH_CUDA}"
                 "nvcc, the CUDA toolkit or cuDNN 9 not found under /usr/local/cuda, or REMAT_WITH_CUDA=OFF")
