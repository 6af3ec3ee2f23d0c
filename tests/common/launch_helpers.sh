# launch_helpers.sh — sourced by the launch tests that run runner-host as
# several processes (tests/host/launch/*.sh): `source launch_helpers.sh TAG`
# leaves $tmp (removed at exit, with every background job SIGKILLed),
# fail MESSAGE [LOG...] (the logs' last lines, training lines left out) and
# free_port (one the kernel gives now, for a rendezvous).
set -euo pipefail
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rh-$1.XXXXXX")
trap 'kill -9 $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $1" >&2
  for f in "${@:2}"; do [[ -f "$f" ]] && { echo "--- $f" >&2; grep -v "Iter(train)" "$f" | tail -40 >&2; }; done
  exit 1
}
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
