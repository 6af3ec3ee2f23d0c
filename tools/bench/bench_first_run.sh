#!/usr/bin/env bash
# A new user's first run, measured on a bare machine: a fresh Debian chroot
# (debootstrap --variant=minbase: no compiler, no LibTorch, nothing of the
# project's) holding a fresh copy of HEAD, no compiler cache
# (CCACHE_DISABLE=1). Times, from the moment each command starts:
#   1. tools/quickstart.sh until its first training line (the logger's
#      first `Epoch(train)` line), and until it ends;
#   2. then tools/test.sh: the extra packages, the build of everything, and
#      ctest (its own "Total Test time").
# Packages come from this machine's archive, as a new machine's would.
#
#   tools/bench/bench_first_run.sh [bookworm|trixie] [--quickstart-only]
#
# Needs root (debootstrap, chroot, mounts). The chroot is made afresh in a
# temporary folder each run (~3 min, not timed) and removed afterwards.
set -euo pipefail
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", b - a }'; }
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SUITE="${1:-bookworm}"
ONLY_QUICKSTART=0
[ "${2:-}" = --quickstart-only ] && ONLY_QUICKSTART=1
[ "$(id -u)" -eq 0 ] || { echo "bench_first_run: needs root" >&2; exit 2; }
MIRROR=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}$/\1/p' \
  /etc/apt/sources.list.d/*.sources 2> /dev/null | head -1)
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
WORK="$(mktemp -d /var/tmp/rh-first-run.XXXXXX)"
D="$WORK/root"
cleanup() {
  for m in dev/shm dev proc sys; do umount -l "$D/$m" 2> /dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "bench_first_run: debootstrap $SUITE (minbase) from $MIRROR (not timed)"
debootstrap --variant=minbase "$SUITE" "$D" "$MIRROR" > "$WORK/debootstrap.log" 2>&1 ||
  { tail -20 "$WORK/debootstrap.log"; exit 1; }
for m in proc sys dev; do mount --rbind "/$m" "$D/$m"; done
mount -t tmpfs -o mode=1777 tmpfs "$D/dev/shm"
cp -L /etc/resolv.conf "$D/etc/resolv.conf"
mkdir -p "$D/src/runner-host"
git -C "$ROOT" archive HEAD | tar -x -C "$D/src/runner-host"

inside() {
  chroot "$D" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 CCACHE_DISABLE=1 bash -c "cd /src/runner-host && $1"
}

echo "bench_first_run: $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
start=$(date +%s.%N)
first="" configure="" compile=""
while IFS= read -r line; do
  echo "$line" >> "$WORK/quickstart.log"
  # The phases: packages (until CMake's first line), configure (until
  # ninja's first step), build and start-up (until the first training line).
  [ -z "$configure" ] && [[ "$line" == "-- "* ]] && configure=$(date +%s.%N)
  [ -z "$compile" ] && [[ "$line" == "[1/"* ]] && compile=$(date +%s.%N)
  if [ -z "$first" ] && [[ "$line" == *"Epoch(train)"* ]]; then
    first=$(date +%s.%N)
    echo "bench_first_run: first training line after $(secs "$start" "$first") s"
  fi
done < <(inside "tools/quickstart.sh 2>&1")
end=$(date +%s.%N)
[ -n "$first" ] || { tail -30 "$WORK/quickstart.log"; echo "bench_first_run: no training line" >&2; exit 1; }
grep -o 'accuracy/top1: [0-9.]*' "$WORK/quickstart.log" | tail -1 | sed 's/^/bench_first_run: last val /'
echo "bench_first_run: tools/quickstart.sh: first training line $(secs "$start" "$first") s," \
  "done $(secs "$start" "$end") s"
if [ -n "$configure" ] && [ -n "$compile" ]; then
  echo "bench_first_run: packages $(secs "$start" "$configure") s, configure" \
    "$(secs "$configure" "$compile") s, build and start-up $(secs "$compile" "$first") s"
fi
[ "$ONLY_QUICKSTART" -eq 1 ] && exit 0

start=$(date +%s.%N)
inside "tools/test.sh" > "$WORK/test.log" 2>&1 || { tail -40 "$WORK/test.log"; echo "bench_first_run: tools/test.sh failed" >&2; exit 1; }
end=$(date +%s.%N)
grep -E "tests passed|Total Test time" "$WORK/test.log" | sed 's/^/bench_first_run: /'
echo "bench_first_run: tools/test.sh after the quickstart: $(secs "$start" "$end") s in all"
