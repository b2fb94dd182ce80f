#!/usr/bin/env bash
# The new user's path, proved: builds a brand-new Debian 12 root (mmdebstrap --variant=apt
# bookworm: nothing preinstalled), clones this repository into it with nothing beside it, and
# runs the README's two commands there:
#   scripts/explore.sh   must build the explorer and render explorer.png (offscreen; its size and
#                        that it is not blank are checked here);
#   scripts/test.sh      must pass every test.
# Run as root (CI is). The root lives in a private mount namespace with /proc, /dev and /sys bound,
# shares the host's apt archive cache and builds with every core. A failure names the stage and
# shows the tail of its log. Logs stay in $FRESH_LOGS (default build/fresh-root).
#   scripts/fresh-root-check.sh [--keep]     --keep: leave the root in place (its path is printed)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
keep=0
[ "${1:-}" = "--keep" ] && keep=1
logs="${FRESH_LOGS:-$repo/build/fresh-root}"
mkdir -p "$logs"
started=$(date +%s)
stamp() { echo "[$(($(date +%s) - started)) s]"; }

fail() {  # stage, log
  echo "fresh-root: FAILED at stage '$1'; the last lines of $2:" >&2
  tail -n 40 "$2" >&2 || true
  exit 1
}

if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-root: needs root (mmdebstrap, chroot, mounts)" >&2
  exit 1
fi
host_tools=()
command -v mmdebstrap >/dev/null || host_tools+=(mmdebstrap)
command -v identify >/dev/null || host_tools+=(imagemagick)
command -v git >/dev/null || host_tools+=(git)
if [ ${#host_tools[@]} -gt 0 ]; then
  echo "fresh-root: installing host tools: ${host_tools[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${host_tools[@]}" \
    >"$logs/host-tools.log" 2>&1 || fail "install host tools" "$logs/host-tools.log"
fi

root=$(mktemp -d /var/tmp/remat-fresh-root.XXXXXX)
cleanup() {
  if [ "$keep" = 1 ]; then
    echo "fresh-root: kept $root"
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT

echo "== fresh-root: mmdebstrap --variant=apt bookworm $(stamp)"
# git and certificates: what a user needs to have cloned the repository; nothing of ours.
mmdebstrap --variant=apt --include=git,ca-certificates bookworm "$root" >"$logs/mmdebstrap.log" 2>&1 ||
  fail mmdebstrap "$logs/mmdebstrap.log"
git clone -q --no-local "$repo" "$root/root/remat" >"$logs/clone.log" 2>&1 || fail clone "$logs/clone.log"
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

# Runs a command as root of the fresh system, in the clone, in a private mount namespace.
in_root() {
  unshare --mount --propagation private -- bash -euc '
    root=$1; shift
    mount --rbind /proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --rbind /sys "$root/sys"
    mkdir -p "$root/var/cache/apt/archives"
    mount --bind /var/cache/apt/archives "$root/var/cache/apt/archives"
    exec chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      bash -euc "cd /root/remat && $*"
  ' _ "$root" "$@"
}

echo "== fresh-root: scripts/explore.sh (set up, build, render) $(stamp)"
explore_started=$(date +%s)
in_root scripts/explore.sh >"$logs/explore.log" 2>&1 || fail "scripts/explore.sh" "$logs/explore.log"
explore_seconds=$(($(date +%s) - explore_started))
grep -E "Remat Explorer [0-9.]+:|^-- +[a-zA-Z ()+,]+: (yes|no)" "$logs/explore.log" | sed 's/^-- /   /'
grep -q "GUI=ON" "$logs/explore.log" || fail "explore.sh configures with GUI=ON" "$logs/explore.log"

echo "== fresh-root: explorer.png $(stamp)"
png="$root/root/remat/explorer.png"
[ -s "$png" ] || fail "explorer.png written" "$logs/explore.log"
cp "$png" "$logs/explorer.png"
read -r width height colours deviation < <(identify -format '%w %h %k %[fx:standard_deviation]\n' "$png")
echo "   explorer.png: ${width}x${height}, $colours colours, standard deviation $deviation"
if [ "$width" -lt 1280 ] || [ "$height" -lt 720 ] || [ "$colours" -lt 64 ] ||
  awk -v d="$deviation" 'BEGIN { exit !(d < 0.05) }'; then
  echo "explorer.png is too small or blank" >>"$logs/explore.log"
  fail "explorer.png not blank" "$logs/explore.log"
fi

echo "== fresh-root: scripts/test.sh $(stamp)"
test_started=$(date +%s)
in_root scripts/test.sh >"$logs/test.log" 2>&1 || fail "scripts/test.sh" "$logs/test.log"
test_seconds=$(($(date +%s) - test_started))
grep -E "tests passed|tests failed" "$logs/test.log" | tail -1
grep -q "100% tests passed" "$logs/test.log" || fail "every test passes" "$logs/test.log"
echo "== fresh-root: passed $(stamp): explore.sh ${explore_seconds} s, then test.sh ${test_seconds} s"
