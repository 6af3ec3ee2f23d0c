#!/usr/bin/env bash
# Checkpoint save and load throughput, one run, a state of ~436 MB: the
# runner-host checkpoint through each checkpoint-IO plugin (safetensors,
# torch, async around safetensors) against peers measured in the same run and directory on the same
# bytes: a raw fsync'd write (dd conv=fsync) and Python's torch.save (with
# fsync) / torch.load of the same tensors (Debian's python3-torch).
#
#   tools/bench/bench_checkpoint.sh [saves >= 4]  (after tools/build.sh)
#
# The job: an MLP of 54.6 M parameters (1024 -> 4 x 4096 -> 10) with SGD
# momentum, 1 rank, a checkpoint after every iteration. A save's time is
# what the runner logs for it (`saved checkpoint ... in S s`: from the start
# of the save to its publication, everything the loop waits for); a load's is
# what a resume logs (`loaded in S s`: weights, optimizer state and loop
# state, strategy wrap and optimizer construction included). Each figure is
# the median of 3; loads read files just written (page cache warm), for the
# peers too. async saves every 20 iterations instead (a save waits for the
# one before it: at most one in flight): its save time is the background's
# (`saved checkpoint ... in S s in the background`), and what the loop waits
# for it (`the loop waited S s`: the snapshot, the files handed over) is
# compared with the synchronous safetensors save.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
SAVES="${1:-4}"
PY=/usr/bin/python3
mkdir -p "${RH_BENCH_DIR:-$ROOT/work_dirs}"
WORK="$(mktemp -d "${RH_BENCH_DIR:-$ROOT/work_dirs}/bench_ckpt.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1

job() {  # $1 = checkpoint_io, $2 = max_iters, $3 = extra, $4 = save interval
  cat <<YAML
seed: 0
model: {type: mlp, in_features: 1024, hidden: [4096, 4096, 4096, 4096], num_classes: 10}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 512, num_features: 1024, num_classes: 10},
          batch_size: 8, shuffle: false, num_workers: 0}
optim_wrapper: {optimizer: {type: SGD, lr: 0.001, momentum: 0.9}}
train_cfg: {by_epoch: false, max_iters: $2}
checkpoint_io: $1
hooks: [{type: checkpoint, by_epoch: false, interval: $4, max_keep_ckpts: 1}]
$3
YAML
}

median3() { printf '%s\n' "$@" | sort -g | sed -n 2p; }

declare -A SAVE_S LOAD_S SPEC EVERY
SPEC=([safetensors]="{type: safetensors}" [torch]="{type: torch}"
      [async]="{type: async, inner: {type: safetensors}}")
EVERY=([safetensors]=1 [torch]=1 [async]=20)
MB=0
for io in safetensors torch async; do
  every=${EVERY[$io]}
  iters=$((SAVES * every))
  job "${SPEC[$io]}" "$iters" "" "$every" > "$WORK/$io.yaml"
  "$BUILD/bin/runner-host" --config "$WORK/$io.yaml" --set work_dir="$WORK/$io" \
    > "$WORK/$io.log" 2>&1 || { cat "$WORK/$io.log"; exit 1; }
  # The saves after the first (its files are new; later ones replace).
  mapfile -t saves < <(grep -o 'MB of tensors in [0-9.]* s' "$WORK/$io.log" | awk '{print $5}' | tail -n +2)
  MB=$(grep -o '([0-9.]* MB of tensors' "$WORK/$io.log" | head -1 | tr -d '(' | awk '{print $1}')
  [ "${#saves[@]}" -ge 3 ] || { echo "bench_checkpoint.sh: needs saves >= 4" >&2; exit 2; }
  SAVE_S[$io]=$(median3 "${saves[@]:0:3}")
  if [ "$io" = async ]; then
    mapfile -t waits < <(grep -o 'the loop waited [0-9.]* s' "$WORK/$io.log" | awk '{print $4}' | tail -n +2)
    WAIT_S=$(median3 "${waits[@]:0:3}")
  fi
  loads=()
  for r in 1 2 3; do
    job "${SPEC[$io]}" "$iters" "resume: $WORK/$io/iter_$iters" "$every" > "$WORK/$io.resume.yaml"
    "$BUILD/bin/runner-host" --config "$WORK/$io.resume.yaml" --set work_dir="$WORK/$io.r$r" \
      > "$WORK/$io.r$r.log" 2>&1 || { cat "$WORK/$io.r$r.log"; exit 1; }
    loads+=("$(grep -o 'loaded in [0-9.]* s' "$WORK/$io.r$r.log" | awk '{print $3}')")
  done
  LOAD_S[$io]=$(median3 "${loads[@]}")
done

BYTES=$("$PY" -c "print(int($MB * 1e6))")
dd_s=()
for r in 1 2 3; do
  t0=$(date +%s.%N)
  dd if=/dev/zero of="$WORK/dd.bin" bs=1M count=$((BYTES / 1048576)) conv=fsync status=none
  t1=$(date +%s.%N)
  rm -f "$WORK/dd.bin"
  dd_s+=("$("$PY" -c "print($t1 - $t0)")")
done
DD_S=$(median3 "${dd_s[@]}")

# Python's torch.save / torch.load of the same tensors: the model's weights
# and biases and as many momentum buffers.
read -r PT_SAVE PT_LOAD < <("$PY" - "$WORK/peer.pt" <<'PY'
import os, sys, time, statistics, torch
sizes = [(4096, 1024), (4096,), (4096, 4096), (4096,), (4096, 4096), (4096,), (4096, 4096),
         (4096,), (10, 4096), (10,)]
d = {}
for i, s in enumerate(sizes):
    d[f"w{i}"] = torch.randn(s)
    d[f"m{i}"] = torch.randn(s)
path = sys.argv[1]
saves, loads = [], []
for _ in range(3):
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(d, f)
        f.flush()
        os.fsync(f.fileno())
    saves.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    torch.load(path)
    loads.append(time.perf_counter() - t0)
print(statistics.median(saves), statistics.median(loads))
PY
)

"$PY" - "$MB" "$DD_S" "$PT_SAVE" "$PT_LOAD" "${SAVE_S[safetensors]}" "${LOAD_S[safetensors]}" \
  "${SAVE_S[torch]}" "${LOAD_S[torch]}" "${SAVE_S[async]}" "${LOAD_S[async]}" "$WAIT_S" <<'PY'
import sys
mb, dd, pt_save, pt_load = (float(x) for x in sys.argv[1:5])
rows = {"safetensors": (float(sys.argv[5]), float(sys.argv[6])),
        "torch": (float(sys.argv[7]), float(sys.argv[8])),
        "async (safetensors inside; save in the background)": (float(sys.argv[9]), float(sys.argv[10]))}
wait = float(sys.argv[11])
print(f"checkpoint of {mb:.0f} MB of tensors (MLP 54.6 M parameters + SGD momentum), 1 rank; medians of 3")
print(f"peers: dd conv=fsync {mb / dd:.0f} MB/s ({dd:.3f} s); torch.save+fsync {mb / pt_save:.0f} MB/s "
      f"({pt_save:.3f} s); torch.load {mb / pt_load:.0f} MB/s ({pt_load:.3f} s)")
print("| checkpoint_io | save MB/s | save / dd (goal >= 0.9) | load MB/s | load / torch.load (goal >= 2) |")
print("|---|---:|---:|---:|---:|")
for io, (save, load) in rows.items():
    print(f"| {io} | {mb / save:.0f} ({save:.3f} s) | {dd / save:.3f} | {mb / load:.0f} ({load:.3f} s) | "
          f"{pt_load / load:.3f} |")
sync = rows["safetensors"][0]
print(f"async: the loop waited {wait:.3f} s per save, {wait / sync:.3f} of the synchronous "
      f"safetensors save ({sync:.3f} s; goal <= 0.1)")
PY
