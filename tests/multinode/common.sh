# common.sh — sourced by the multi-node tests: `source common.sh TAG`.
# Exits 77 (a skip, with the reason) where simulated hosts cannot be made;
# else leaves $sim (simhosts.sh), $tmp (removed at exit), $set_name (this
# test's hosts, removed at exit), fail MESSAGE [LOG...], and
# write_job FILE EXTRA [OPTIMIZER]: a tiny mlp job on synthetic data with
# EXTRA lines (AdamW unless OPTIMIZER, a YAML flow map, says otherwise).
set -euo pipefail
sim="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/simhosts.sh"
# A missing tool that tools/install-deps.sh installs fails under CI (a skip
# there would be a silent gap); namespaces a machine does not permit skip.
if ! why=$("$sim" check); then
  for tool in "ip(8):iproute2" "unshare(1):util-linux"; do
    if [[ "$why" == *"${tool%%:*} not found"* ]] &&
      "$(dirname "${BASH_SOURCE[0]}")/../../tools/install-deps.sh" --missing-is-failure "${tool##*:}"; then
      echo "FAIL: $why"
      exit 1
    fi
  done
  echo "$why"
  exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rh-multinode-$1.XXXXXX")
set_name="mn$$"
trap '"$sim" down "$set_name" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $1" >&2
  for f in "${@:2}"; do [[ -f "$f" ]] && { echo "--- $f" >&2; tail -40 "$f" >&2; }; done
  exit 1
}
write_job() {
  local optimizer=${3:-"{type: AdamW, lr: 0.01, weight_decay: 0.01}"}
  cat > "$1" <<YAML
seed: 3
model: {type: mlp, in_features: 16, hidden: [32, 32], num_classes: 4}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 512, num_features: 16, num_classes: 4},
          batch_size: 4, shuffle: true, num_workers: 0}
optim_wrapper: {optimizer: $optimizer}
$2
YAML
}
