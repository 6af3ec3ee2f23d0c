#!/usr/bin/env bash
# local_sgd_out_of_tree.sh <build_dir> <source_dir>
#
# The headline use case: a strategy that is not ours, built against the
# *installed* SDK alone (find_package(RunnerHostSDK) with only
# CMAKE_PREFIX_PATH), loaded by `strategy: {plugin: <path>, type: local_sgd}`
# and trained on 2 ranks. With sync_every: 1 and plain SGD, local SGD equals
# data parallel, so its parameters must match ddp's after the same steps.
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rh-local-sgd.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; [[ -f "${2:-}" ]] && cat "$2" >&2; exit 1; }

cmake --install "$build_dir" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || fail "install" "$tmp/install.log"
cp -R "$source_dir/examples/strategy_local_sgd" "$tmp/src"
cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/configure.log" 2>&1 ||
  fail "configure against the installed SDK" "$tmp/configure.log"
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 || fail "build" "$tmp/build.log"
grep -q "warning:" "$tmp/build.log" && fail "the example has compiler warnings" "$tmp/build.log"
plugin="$tmp/build/librh_strategy_local_sgd.so"
[[ -f "$plugin" ]] || fail "no $plugin"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cat > "$tmp/job.yaml" <<YAML
seed: 5
model: {type: mlp, in_features: 16, hidden: [32], num_classes: 4}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 320, num_features: 16, num_classes: 4},
          batch_size: 8, shuffle: true, num_workers: 0}
optim_wrapper: {optimizer: {type: SGD, lr: 0.05}}
train_cfg: {by_epoch: false, max_iters: 20}
hooks: [{type: checkpoint, by_epoch: false, interval: 20}]
dist: {timeout_s: 30}
YAML
host="$tmp/prefix/bin/runner-host"
"$host" --config "$tmp/job.yaml" --nproc-per-node 2 --master-port "$(port)" --set work_dir="$tmp/local" \
  --set "strategy={type: local_sgd, plugin: $plugin, sync_every: 1}" >"$tmp/local.log" 2>&1 ||
  fail "training with the out-of-tree local_sgd strategy" "$tmp/local.log"
grep -q "strategy local_sgd" "$tmp/local.log" || fail "local_sgd was not the strategy" "$tmp/local.log"
"$host" --config "$tmp/job.yaml" --nproc-per-node 2 --master-port "$(port)" --set work_dir="$tmp/ddp" \
  --set "strategy={type: ddp}" >"$tmp/ddp.log" 2>&1 || fail "training with ddp" "$tmp/ddp.log"

# Compare the float32 tensors of both checkpoints (safetensors read with the
# standard library: 8-byte header length, JSON header, raw little-endian data).
python3 - "$tmp/local/iter_20/model.safetensors" "$tmp/ddp/iter_20/model.safetensors" <<'PY'
import json, struct, sys
def load(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__" or e["dtype"] != "F32":
            continue
        b, end = e["data_offsets"]
        out[name] = struct.unpack("<%df" % ((end - b) // 4), data[8 + n + b:8 + n + end])
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys() and a, (a.keys(), b.keys())
for name in a:
    scale = max(abs(x) for x in b[name])
    diff = max(abs(x - y) for x, y in zip(a[name], b[name]))
    assert diff <= 1e-5 * scale, f"{name}: max |diff| {diff} > 1e-5 x {scale}"
print("ok   local_sgd (sync_every 1) matches ddp on", len(a), "tensors")
PY
