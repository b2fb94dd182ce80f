#!/usr/bin/env bash
# Sets up, builds and launches the explorer on a built-in example chain (VGG-16, batch 64, 224x224).
#   scripts/explore.sh [explorer arguments]     default: --zoo vgg16
# Without a display it renders the window to explorer.png instead (and says so); without Qt it
# runs the `remat` command line on the same model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake --preset dev
cmake --build --preset dev -j "$(nproc)"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--zoo vgg16)
explorer=build/dev/app/gui/remat-explorer
if [ ! -x "$explorer" ]; then
  echo "explore: this build has no GUI (Qt 6 not found); showing the command line instead" >&2
  build/dev/app/cli/remat compare zoo:vgg16
  exit 0
fi
if [ -z "${DISPLAY:-}" ] && [ -z "${WAYLAND_DISPLAY:-}" ]; then
  echo "explore: no display; rendering the explorer window to explorer.png" >&2
  QT_QPA_PLATFORM=offscreen exec "$explorer" "${args[@]}" --screenshot explorer.png
fi
exec "$explorer" "${args[@]}"
