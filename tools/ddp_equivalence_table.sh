#!/usr/bin/env bash
# Loss curves of the ddp equivalence check as a Markdown table: 1 rank with
# batch 16 against ddp on 2 ranks with batch 8 each (the job of
# tests/host/launch DdpOnTwoRanksEqualsOneRankWithTheGlobalBatch).
#   tools/ddp_equivalence_table.sh > docs/ddp_equivalence.md   (after tools/build.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job() {  # $1 batch
  cat <<YAML
seed: 3
model: {type: mlp, in_features: 16, hidden: [64, 64], num_classes: 4}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 800, num_features: 16, num_classes: 4},
          batch_size: $1, shuffle: true, num_workers: 0}
optim_wrapper: {optimizer: {type: SGD, lr: 0.05, momentum: 0.9}}
train_cfg: {by_epoch: false, max_iters: 50}
hooks: [{type: metrics}]
YAML
}
job 16 > "$tmp/single.yaml"
job 8 > "$tmp/ddp.yaml"
"$BUILD/bin/runner-host" --config "$tmp/single.yaml" --set work_dir="$tmp/single" --set 'strategy={type: single}' >/dev/null 2>&1
"$BUILD/bin/runner-host" --config "$tmp/ddp.yaml" --set work_dir="$tmp/ddp" --set 'strategy={type: ddp}' \
  --nproc-per-node 2 --master-port 0 >/dev/null 2>&1
python3 - "$tmp/single/metrics.jsonl" "$tmp/ddp/metrics.jsonl" <<'PY'
import json, sys
def losses(p):
    return {r["iter"]: r["loss"] for r in map(json.loads, open(p)) if r.get("mode") == "train"}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
print("# ddp on 2 ranks vs 1 rank with the global batch\n")
print("MLP 16-64-64-4, SGD lr 0.05 momentum 0.9, 800 synthetic samples, seed 3;")
print("1 rank: batch 16; ddp: 2 ranks x batch 8 (loss = mean over ranks).")
print("Produced by `tools/ddp_equivalence_table.sh`; the parameters after 50 steps")
print("agree within 1e-5 of each tensor's largest value (tests/host/launch).\n")
print("| iteration | loss, 1 rank | loss, ddp 2 ranks | difference |")
print("|---:|---:|---:|---:|")
for it in sorted(a):
    if it == 1 or it % 5 == 0:
        print(f"| {it} | {a[it]:.6f} | {b[it]:.6f} | {b[it] - a[it]:+.2e} |")
PY
