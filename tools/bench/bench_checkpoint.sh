#!/usr/bin/env bash
# Checkpoint save throughput: runner-host's save (safetensors through the
# checkpoint-IO plugin, every file fsynced, atomic publish) against its peer
# measured in the same run and directory, writing the same number of bytes
# with dd and fsync (conv=fsync).
#
#   tools/bench/bench_checkpoint.sh [saves]       (after tools/build.sh)
#
# The job: an MLP of 37.8 M parameters with SGD momentum (one checkpoint:
# the model, the momentum and the state, ~300 MB), 1 rank, a checkpoint
# after every iteration. The time of a save is the difference between that
# run and the same run without the checkpoint hook, divided by the saves
# (so the training time cancels), the median of 3 pairs.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
SAVES="${1:-4}"
WORK="$(mktemp -d "${RH_BENCH_DIR:-$ROOT/work_dirs}/bench_ckpt.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1

cat > "$WORK/job.yaml" <<YAML
seed: 0
model: {type: mlp, in_features: 1024, hidden: [4096, 4096, 4096], num_classes: 10}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 4096, num_features: 1024, num_classes: 10},
          batch_size: 8, shuffle: false, num_workers: 0}
optim_wrapper: {optimizer: {type: SGD, lr: 0.001, momentum: 0.9}}
train_cfg: {by_epoch: false, max_iters: $SAVES}
YAML

seconds() {  # $1 = work dir, $2 = hooks
  local t0 t1
  t0=$(date +%s.%N)
  "$BUILD/bin/runner-host" --config "$WORK/job.yaml" --set work_dir="$1" --set "hooks=$2" \
    > "$1.log" 2>&1 || { cat "$1.log"; exit 1; }
  t1=$(date +%s.%N)
  python3 -c "print($t1 - $t0)"
}

per_save=()
for r in 1 2 3; do
  with=$(seconds "$WORK/with$r" "[{type: checkpoint, by_epoch: false, interval: 1, max_keep_ckpts: 1}]")
  without=$(seconds "$WORK/without$r" "[]")
  per_save+=("$(python3 -c "print(($with - $without) / $SAVES)")")
done
BYTES=$(du -sb "$WORK/with1/iter_$SAVES" | cut -f1)
SAVE_S=$(printf '%s\n' "${per_save[@]}" | sort -g | sed -n 2p)

dd_s=()
for r in 1 2 3; do
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=$((BYTES / 1048576)) conv=fsync status=none
  t1=$(date +%s.%N)
  rm -f "$WORK/dd.bin"
  dd_s+=("$(python3 -c "print($t1 - $t0)")")
done
DD_S=$(printf '%s\n' "${dd_s[@]}" | sort -g | sed -n 2p)

python3 - "$BYTES" "$SAVE_S" "$DD_S" "${per_save[*]}" "${dd_s[*]}" <<'PY'
import sys
b, save, dd = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
mb = b / 2**20
dd_mb = (b // 2**20)
print(f"checkpoint of {mb:.0f} MiB (model + SGD momentum + state), 1 rank, {sys.argv[4].count(' ') + 1} pairs")
print(f"runner-host save: {save:.3f} s ({mb / save:.0f} MiB/s); runs {sys.argv[4]}")
print(f"dd + fsync, same bytes: {dd:.3f} s ({dd_mb / dd:.0f} MiB/s); runs {sys.argv[5]}")
print(f"ratio runner-host / dd throughput: {(mb / save) / (dd_mb / dd):.3f}")
PY
