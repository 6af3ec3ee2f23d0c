#!/usr/bin/env bash
# Runs a command inside a Debian 13 (trixie) chroot: LibTorch 2.6 and
# python3-torch 2.6 from Debian's archive, the packages of
# tools/install-deps.sh under their Debian 13 names (installed by that very
# script, run inside), and this checkout at the same path. tools/test.sh
# --torch2 builds and tests the project there, as .ci/run does.
#
#   tools/torch2_chroot.sh COMMAND [ARG...]   e.g. tools/torch2_chroot.sh tools/test.sh -R Cli
#   tools/torch2_chroot.sh --create           make (or update) the chroot only
#
# The chroot is made once with debootstrap (minbase, main + contrib) from the
# archive of this machine's apt sources, and kept in $RH_TORCH2_CHROOT
# (default ~/.cache/runner-host/trixie, beside ccache's cache, so that CI's
# next run finds both). Each run checks that the packages are installed
# (tools/install-deps.sh does nothing when they are) and enters the chroot
# in a private mount namespace (unshare): /proc, /sys and /dev bound, a fresh
# tmpfs on /dev/shm (the communicator's shared memory), the checkout and
# $CCACHE_DIR bound at their own paths. The mounts vanish with the command,
# so nothing is left mounted whatever way it ends. Needs root (debootstrap,
# mounts, chroot); the simulated hosts of tests/multinode make their network
# namespaces inside it as they do outside.
#
# Env: RH_TORCH2_CHROOT (the folder), RH_TORCH2_SUITE (trixie),
#      RH_TORCH2_MIRROR (the archive; default: this machine's).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${RH_TORCH2_CHROOT:-$HOME/.cache/runner-host/trixie}"
SUITE="${RH_TORCH2_SUITE:-trixie}"

if [ "$(id -u)" -ne 0 ]; then
  echo "torch2_chroot: needs root (debootstrap, mount, chroot)" >&2
  exit 2
fi
if [ $# -eq 0 ]; then
  echo "usage: tools/torch2_chroot.sh COMMAND [ARG...] | --create" >&2
  exit 2
fi

# This machine's archive (deb822 sources or sources.list), so that a
# machine behind a mirror builds the chroot from the same mirror.
mirror() {
  if [ -n "${RH_TORCH2_MIRROR:-}" ]; then
    echo "$RH_TORCH2_MIRROR"
    return
  fi
  local uri
  uri=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)\/\{0,1\}$/\1/p' \
    /etc/apt/sources.list.d/*.sources 2> /dev/null | head -1)
  [ -n "$uri" ] || uri=$(sed -n 's/^deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\{0,1\}\([^[:space:]]*\/debian\)\/\{0,1\}[[:space:]].*/\2/p' \
    /etc/apt/sources.list 2> /dev/null | head -1)
  echo "${uri:-http://deb.debian.org/debian}"
}

# 1. The base system, once (~3 min, 215 MB).
if [ ! -x "$DIR/usr/bin/apt-get" ] || [ ! -f "$DIR/.rh-debootstrap-done" ]; then
  command -v debootstrap > /dev/null || {
    echo "torch2_chroot: installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap > /dev/null
  }
  m=$(mirror)
  echo "torch2_chroot: debootstrap $SUITE from $m into $DIR"
  rm -rf "$DIR"
  mkdir -p "$(dirname "$DIR")"
  debootstrap --variant=minbase --components=main,contrib "$SUITE" "$DIR" "$m" > "$DIR.debootstrap.log" 2>&1 ||
    { tail -20 "$DIR.debootstrap.log"; echo "torch2_chroot: debootstrap failed (log: $DIR.debootstrap.log)" >&2; exit 1; }
  touch "$DIR/.rh-debootstrap-done"
fi

# 2. Enter: a private mount namespace, the binds, then chroot. Arguments
# pass through the environment one per variable, so that none is re-parsed.
enter() {
  local ccache="${CCACHE_DIR:-$HOME/.cache/ccache}"
  mkdir -p "$ccache"
  RH_CHROOT_DIR="$DIR" RH_CHROOT_ROOT="$ROOT" RH_CHROOT_CCACHE="$ccache" \
    unshare --mount --propagation private -- bash -euc '
      D=$RH_CHROOT_DIR
      # The chroot a mount point of its own: inside, "/" then is one, so
      # that unshare -m (the simulated hosts, the node-local storage test)
      # can change its propagation; --rbind keeps a bind made below it
      # before (tools/bench/bench_torch26.sh: a 2.6 build of another worktree).
      mount --rbind "$D" "$D"
      for fs in proc sys dev; do mkdir -p "$D/$fs"; mount --rbind "/$fs" "$D/$fs"; done
      mkdir -p "$D/dev/shm" && mount -t tmpfs -o mode=1777 tmpfs "$D/dev/shm"
      mkdir -p "$D/run" && mount -t tmpfs tmpfs "$D/run"
      mkdir -p "$D$RH_CHROOT_ROOT" "$D$RH_CHROOT_CCACHE" "$D/tmp"
      mount --bind "$RH_CHROOT_ROOT" "$D$RH_CHROOT_ROOT"
      mount --bind "$RH_CHROOT_CCACHE" "$D$RH_CHROOT_CCACHE"
      cp -L /etc/resolv.conf "$D/etc/resolv.conf" 2>/dev/null || true
      exec chroot "$D" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        LANG=C.UTF-8 TERM="${TERM:-dumb}" CI="${CI:-}" CCACHE_DIR="$RH_CHROOT_CCACHE" \
        CCACHE_BASEDIR="${CCACHE_BASEDIR:-}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-}" \
        RH_FUZZ_RUNS="${RH_FUZZ_RUNS:-}" RH_BUILD_DIR="${RH_BUILD_DIR:-}" RH_TORCH=system \
        bash -c "cd \"\$0\" && exec \"\$@\"" "$RH_CHROOT_ROOT" "$@"
    ' bash "$@"
}

# 3. The packages (tools/install-deps.sh --tests inside: Debian 13's names;
# nothing to do once installed).
enter tools/install-deps.sh --tests
[ "$1" = --create ] && exit 0
enter "$@"
