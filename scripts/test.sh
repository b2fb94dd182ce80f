#!/usr/bin/env bash
# Sets up, builds and runs every test: the README's test command, and what CI runs.
#   scripts/test.sh [PRESET]     PRESET: dev (default: everything, the GUI required), cpu-only,
#                                headless, asan
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-dev}"
scripts/setup-deps.sh
jobs="${REMAT_JOBS:-$(nproc)}"
cmake --preset "$preset"
cmake --build --preset "$preset" -j "$jobs"
QT_QPA_PLATFORM=offscreen ctest --preset "$preset" -j "$jobs"
