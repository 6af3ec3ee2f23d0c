#!/usr/bin/env bash
# Simulated hosts on this machine, for multi-node tests (issue 32).
#
# Each "host" is its own network namespace, joined to the others through a
# bridge that lives in a switch namespace of its own, so the links and their
# addresses exist only inside namespaces this script created: nothing is
# added to the machine's own network and nothing leaves it. A command run on
# a host also gets its own hostname (UTS namespace), its own IPC namespace
# and its own /dev/shm (a private tmpfs in a mount namespace): runner-host
# sees separate machines, so its ranks talk TCP across hosts and shared
# memory only inside one (host/comm/ShmAllReduce.cpp names a host by
# hostname, boot id and IPC/PID namespaces). The file system stays shared,
# as a cluster's network file system is: work_dir and checkpoints are seen
# by every host.
#
#   simhosts.sh check                  exit 0 when namespaces can be made here, else 77 and why
#   simhosts.sh up SET N [MBIT]        make hosts 0..N-1 of SET (a name of yours); MBIT rate-limits
#                                      each host's link (tc tbf), both ways
#   simhosts.sh addr SET I             host I's address (10.77.0.<I+1>)
#   simhosts.sh exec SET I CMD...      run CMD on host I, in the foreground; its exit code
#   simhosts.sh link SET I up|down     take host I's link down (a cable pulled) or back up
#   simhosts.sh kill SET I [SIGNAL]    signal every process of host I (default KILL)
#   simhosts.sh pids SET I             the processes of host I
#   simhosts.sh down SET               kill every process of SET, remove its namespaces
#
# SET names a group of namespaces (rh-SET-sw, rh-SET-h0, ...): tests that run
# at the same time use different sets (the test's pid in it), and `down`
# removes a set a killed test left behind. Needs root (CI and this project's
# machine have it) with ip(8) and unshare(1).
set -euo pipefail

NET=10.77.0

die() { echo "simhosts.sh: $*" >&2; exit 1; }
ns_sw() { echo "rh-$1-sw"; }
ns_host() { echo "rh-$1-h$2"; }

check() {
  local why=""
  command -v ip >/dev/null || why="ip(8) not found (Debian: iproute2)"
  [[ -z "$why" ]] && { command -v unshare >/dev/null || why="unshare(1) not found (Debian: util-linux)"; }
  [[ -z "$why" ]] && [[ "$(id -u)" != 0 ]] && why="needs root to make network namespaces (uid $(id -u))"
  if [[ -z "$why" ]]; then
    local probe="rh-probe-$$"
    if ! err=$(ip netns add "$probe" 2>&1); then
      why="ip netns add is not permitted here: $err"
    else
      if ! err=$(ip netns exec "$probe" unshare --uts --ipc --mount --propagation private \
                 sh -c 'hostname probe && mount -t tmpfs tmpfs /dev/shm' 2>&1); then
        why="unshare --uts --ipc --mount or a tmpfs mount is not permitted here: $err"
      elif ! err=$(ip netns exec "$probe" ip link add p0 type veth peer name p1 2>&1); then
        why="veth pairs are not permitted here: $err"
      fi
      ip netns del "$probe" 2>/dev/null || true
    fi
  fi
  if [[ -n "$why" ]]; then echo "simulated hosts unavailable: $why"; exit 77; fi
}

up() {
  local set=$1 n=$2 mbit=${3:-}
  [[ "$n" =~ ^[1-9][0-9]?$ && "$n" -le 200 ]] || die "up: N must be 1..200, got '$n'"
  down "$set" 2>/dev/null || true
  local sw; sw=$(ns_sw "$set")
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    local h; h=$(ns_host "$set" "$i")
    ip netns add "$h"
    ip -n "$h" link set lo up
    ip -n "$sw" link add "h$i" type veth peer name eth0 netns "$h"
    ip -n "$sw" link set "h$i" master br0
    ip -n "$sw" link set "h$i" up
    ip -n "$h" addr add "$NET.$((i + 1))/24" dev eth0
    ip -n "$h" link set eth0 up
    if [[ -n "$mbit" ]]; then
      # Both directions: the host's egress on eth0, the switch's egress towards the host.
      ip netns exec "$h" tc qdisc add dev eth0 root tbf rate "${mbit}mbit" burst 256kb latency 50ms
      ip netns exec "$sw" tc qdisc add dev "h$i" root tbf rate "${mbit}mbit" burst 256kb latency 50ms
    fi
  done
  # A bridge forwards once its ports are in the forwarding state (at once, with STP off).
  for _ in $(seq 50); do
    local waiting=0
    for ((i = 0; i < n; i++)); do
      ip -n "$sw" -d link show "h$i" | grep -q "bridge_slave state forwarding" || waiting=1
      ip -n "$(ns_host "$set" "$i")" link show eth0 | grep -q LOWER_UP || waiting=1
    done
    [[ $waiting == 0 ]] && return 0
    sleep 0.1
  done
  die "up: the links of set $set did not come up"
}

addr() { echo "$NET.$(($2 + 1))"; }

exec_on() {
  local set=$1 i=$2; shift 2
  local h; h=$(ns_host "$set" "$i")
  ip netns list | grep -qw "$h" || die "exec: no host $i in set $set (simhosts.sh up first)"
  exec ip netns exec "$h" unshare --uts --ipc --mount --propagation private \
    sh -c 'hostname "$0" && mount -t tmpfs -o size=1g,mode=1777 tmpfs /dev/shm && exec "$@"' \
    "sim-$set-h$i" "$@"
}

link() {
  local set=$1 i=$2 state=$3
  [[ "$state" == up || "$state" == down ]] || die "link: up or down, got '$state'"
  ip -n "$(ns_sw "$set")" link set "h$i" "$state"
}

pids() { ip netns pids "$(ns_host "$1" "$2")" 2>/dev/null || true; }

kill_host() {
  local set=$1 i=$2 sig=${3:-KILL} p
  for p in $(pids "$set" "$i"); do kill -s "$sig" "$p" 2>/dev/null || true; done
}

down() {
  local set=$1 ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^rh-$set-(sw|h[0-9]+)$" || true); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
}

cmd=${1:-}; shift || true
case "$cmd" in
  check) check ;;
  up) [[ $# -ge 2 ]] || die "usage: up SET N [MBIT]"; up "$@" ;;
  addr) [[ $# -eq 2 ]] || die "usage: addr SET I"; addr "$@" ;;
  exec) [[ $# -ge 3 ]] || die "usage: exec SET I CMD..."; exec_on "$@" ;;
  link) [[ $# -eq 3 ]] || die "usage: link SET I up|down"; link "$@" ;;
  kill) [[ $# -ge 2 ]] || die "usage: kill SET I [SIGNAL]"; kill_host "$@" ;;
  pids) [[ $# -eq 2 ]] || die "usage: pids SET I"; pids "$@" ;;
  down) [[ $# -eq 1 ]] || die "usage: down SET"; down "$@" ;;
  *) sed -n '2,30p' "$0" >&2; exit 2 ;;
esac
