#!/usr/bin/env bash
# Sets up, builds and launches the explorer on a built-in example chain (VGG-16, batch 64, 224x224,
# planned with the linear planner).
#   scripts/explore.sh [explorer arguments]     default: --zoo vgg16
# Without a display it renders the window to explorer.png instead (and says so). The GUI is
# required: a missing package is a configure error that names it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake --preset dev -DREMAT_BUILD_GUI=ON
cmake --build --preset dev -j "$(nproc)" --target remat-explorer
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--zoo vgg16)
explorer=build/dev/app/gui/remat-explorer
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "explore: no display; rendering the explorer window to explorer.png" >&2
  QT_QPA_PLATFORM=offscreen exec "$explorer" "${args[@]}" --screenshot explorer.png
fi
exec "$explorer" "${args[@]}"
