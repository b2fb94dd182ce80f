#!/usr/bin/env bash
# Installs every Debian 12 package the full build needs (the explorer, the command line, the tests
# and the benchmarks). As root it runs apt-get; otherwise it prints the exact apt-get line to run.
# The list was found by running this script in a brand-new Debian 12 root (mmdebstrap
# --variant=apt bookworm) until `cmake --preset dev` and every test passed there; .ci/run checks
# it on every landing (scripts/fresh-root-check.sh).
# CUDA 13 and cuDNN 9 are not Debian packages: when they are under /usr/local/cuda the build picks
# them up (REMAT_WITH_CUDA), otherwise it builds without them and says so.
#   scripts/setup-deps.sh --fuzz   also what the fuzzers and the hostile campaign need
#                                  (scripts/fuzz.sh, scripts/hostile-campaign.py; a stage of .ci/run)
set -euo pipefail
packages=(
  # compiler and build tools
  build-essential cmake ninja-build pkg-config
  # core, the command line, tests and benchmarks
  nlohmann-json3-dev libcli11-dev googletest libgtest-dev libgmock-dev libbenchmark-dev
  # the ONNX importer: ONNX's protobuf classes and protobuf itself (its CMake config wants protoc)
  libonnx-dev libprotobuf-dev protobuf-compiler
  # the CPU backend's kernels (convolution, pooling, batch norm, matmul, element-wise)
  libdnnl-dev
  # the explorer: Qt 6 Widgets, Charts (which needs Qt6OpenGL), Svg, Test; XKB for Qt6Gui; a font
  # for the offscreen screenshot
  qt6-base-dev qt6-charts-dev libqt6svg6-dev libqt6opengl6-dev libxkbcommon-dev libgl-dev
  fonts-dejavu-core
  # python/remat_torch and its tests (tests/python, scripts/torch-fidelity.py): PyTorch (CPU),
  # torchvision's models, and ONNX for the exports remat plans from
  python3 python3-torch python3-torchvision python3-onnx
)
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(
    # clang's libFuzzer and sanitizers (REMAT_BUILD_FUZZERS), and python3 for the fuzzers' seeds
    # and the hostile campaign, whose ONNX families build models with python3-onnx
    clang libclang-rt-14-dev python3 python3-onnx
  )
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all Debian packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup-deps: missing packages; run as root:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "setup-deps: installing ${#missing[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup-deps: done"
