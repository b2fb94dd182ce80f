#!/usr/bin/env bash
# Installs the Debian 12 packages Remat Explorer builds with. As root it runs apt-get; otherwise it
# prints the exact apt-get line to run. CUDA 13 and cuDNN 9 are not Debian packages: when they are
# under /usr/local/cuda the build picks them up (REMAT_WITH_CUDA), otherwise it builds without them.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config
  googletest libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
  qt6-base-dev qt6-charts-dev libqt6svg6-dev libgl-dev)
missing=()
for p in "${packages[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all Debian packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "setup-deps: missing packages; run as root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
