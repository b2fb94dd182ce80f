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
message(STATUS "Remat Explorer ${PROJECT_VERSION}: GUI=${REMAT_BUILD_GUI} CUDA=${REMAT_WITH_CUDA} CLI=${REMAT_BUILD_CLI} "
               "tests=${REMAT_BUILD_TESTS} benchmarks=${REMAT_BUILD_BENCHMARKS} fuzzers=${REMAT_BUILD_FUZZERS}")
message(STATUS "  core (model, simulator, planners, files, zoo, CPU executor): yes")
_remat_part_line("remat command line" "${REMAT_BUILD_CLI}" "CLI11 not found or REMAT_BUILD_CLI=OFF")
_remat_part_line("explorer (Qt 6 GUI)" "${REMAT_BUILD_GUI}" "REMAT_BUILD_GUI=OFF")
_remat_part_line("GPU executor (CUDA + cuDNN)" "${REMAT_WITH_CUDA}"
                 "nvcc, the CUDA toolkit or cuDNN 9 not found under /usr/local/cuda, or REMAT_WITH_CUDA=OFF")
