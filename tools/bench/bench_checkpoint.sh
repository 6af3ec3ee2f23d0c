#!/usr/bin/env bash
# Checkpoint save and load throughput of a ~437 MB state: the runner-host
# checkpoint through each checkpoint-IO plugin (safetensors, torch, async
# around safetensors) against peers measured in the same rounds, on the same
# bytes, in the same directory:
#   - raw write: the checkpoint's own bytes (its files, concatenated) written
#     with write(2) in 1 MiB pieces and fsynced, what `dd bs=1M conv=fsync`
#     does, from memory (dd from a file would add a read; dd from /dev/zero
#     writes zeros, which this VM's disk took 8% faster than real data);
#   - Python's torch.save (fsynced) and torch.load of the same tensors
#     (Debian's python3-torch).
#
#   tools/bench/bench_checkpoint.sh [saves >= 4] [rounds, default 3]  (after tools/build.sh)
#   RH_BENCH_HEAP=keep|release: the runner's env_cfg.heap (default: its default, release)
#
# The job: an MLP of 54.6 M parameters (1024 -> 4 x 4096 -> 10) with SGD
# momentum, 1 rank, a checkpoint after every iteration, max_keep_ckpts 1. A
# save's time is what the runner logs for it (`saved checkpoint ... in S s`:
# from the start of the save to its publication, everything the loop waits
# for), the median of the saves after the first (the first one's files are
# the process's first); a load's is what a resume logs (`loaded in S s`:
# choosing and verifying the checkpoint, weights, optimizer state and loop
# state). Loads read files just written (page cache warm), for the peers too.
# async saves every 20 iterations instead (a save waits for the one before
# it: at most one in flight): its save time is the background's (`saved
# checkpoint ... in S s in the background`), and what the loop waits for it
# (`the loop waited S s`: the snapshot, the files handed over) is compared
# with the synchronous safetensors save of the same round.
#
# Rounds: every variant and every peer once per round, one after the other,
# so that the machine's drift (this VM's page cache and disk vary by 2-3x
# from minute to minute) moves a round's figures together; each ratio is
# taken within a round, and the median over rounds is printed with its
# spread (min-max).
#
# The raw write runs at the runner's pace: each file is written, then the
# previous one is removed on a thread of its own, as max_keep_ckpts: 1
# removes the previous checkpoint after a save (the runner's
# BackgroundRemover), while it waits as long as the runner trained between
# two saves (from the runner's log); the next write waits for that removal
# first, as the runner's next save does. On this VM the pace decides
# the figure: pages freed and left idle for a second are handed back to the
# hypervisor, and writing into fresh page-cache pages then costs 3x
# (measured: the same 437 MB written back to back 0.33-0.37 s, with 1.5 s
# between writes 1.2-1.35 s).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
SAVES="${1:-4}"
ROUNDS="${2:-3}"
PY=/usr/bin/python3
[ "$SAVES" -ge 4 ] || { echo "bench_checkpoint.sh: needs saves >= 4" >&2; exit 2; }
[ "$ROUNDS" -ge 1 ] || { echo "bench_checkpoint.sh: needs rounds >= 1" >&2; exit 2; }
"$PY" -c 'import torch' 2> /dev/null ||
  { echo "bench_checkpoint.sh: the peers need Python's torch: apt-get install python3-torch" >&2; exit 2; }
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
${RH_BENCH_HEAP:+env_cfg: {heap: $RH_BENCH_HEAP\}}
$3
YAML
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

declare -A SPEC EVERY
SPEC=([safetensors]="{type: safetensors}" [torch]="{type: torch}"
      [async]="{type: async, inner: {type: safetensors}}")
EVERY=([safetensors]=1 [torch]=1 [async]=20)
ROWS=()  # one line per round: name=value ...
MB=0
for round in $(seq 1 "$ROUNDS"); do
  row="round=$round"
  for io in safetensors torch async; do
    every=${EVERY[$io]}
    iters=$((SAVES * every))
    out="$WORK/$io"
    rm -rf "$out" "$out.r"
    job "${SPEC[$io]}" "$iters" "" "$every" > "$WORK/$io.yaml"
    "$BUILD/bin/runner-host" --config "$WORK/$io.yaml" --set work_dir="$out" \
      > "$WORK/$io.log" 2>&1 || { cat "$WORK/$io.log"; exit 1; }
    # The saves after the first.
    mapfile -t saves < <(grep -o 'MB of tensors in [0-9.]* s' "$WORK/$io.log" | awk '{print $5}' | tail -n +2)
    MB=$(grep -o '([0-9.]* MB of tensors' "$WORK/$io.log" | head -1 | tr -d '(' | awk '{print $1}')
    row+=" ${io}_save=$(median "${saves[@]}")"
    if [ "$io" = async ]; then
      mapfile -t waits < <(grep -o 'the loop waited [0-9.]* s' "$WORK/$io.log" | awk '{print $4}' | tail -n +2)
      row+=" async_wait=$(median "${waits[@]}")"
    fi
    job "${SPEC[$io]}" "$iters" "resume: $out/iter_$iters" "$every" > "$WORK/$io.resume.yaml"
    "$BUILD/bin/runner-host" --config "$WORK/$io.resume.yaml" --set work_dir="$out.r" \
      > "$WORK/$io.r.log" 2>&1 || { cat "$WORK/$io.r.log"; exit 1; }
    row+=" ${io}_load=$(grep -o 'loaded in [0-9.]* s' "$WORK/$io.r.log" | awk '{print $3}')"
    if [ "$io" = safetensors ]; then
      cat "$out/iter_$iters"/*.safetensors > "$WORK/bytes.bin"  # the peers' bytes
      # The runner's pace: from the end of one save to the start of the next.
      PACE=$("$PY" - "$WORK/$io.log" <<'PY'
import re, statistics, sys
ends, lengths = [], []
for line in open(sys.argv[1]):
    m = re.match(r"\[(\d+):(\d+):([\d.]+)\] \[info\] saved checkpoint .* in ([\d.]+) s,", line)
    if m:
        h, mi, se, s = m.groups()
        ends.append(int(h) * 3600 + int(mi) * 60 + float(se))
        lengths.append(float(s))
print(statistics.median(ends[k + 1] - lengths[k + 1] - ends[k] for k in range(len(ends) - 1)))
PY
)
    fi
    rm -rf "$out.r"
  done
  # The peers: the raw write of the checkpoint's bytes ($SAVES times, each
  # into a new file, the previous removed after it; median of all but the
  # first, as for the saves), then torch.save / torch.load of the same
  # tensors (the second of two; the first warms the page cache).
  row+=" pace=$PACE $("$PY" - "$WORK" "$SAVES" "$PACE" <<'PY'
import os, statistics, sys, threading, time, torch
work, saves, pace = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(os.path.join(work, "bytes.bin"), "rb") as f:
    data = memoryview(f.read())
os.remove(os.path.join(work, "bytes.bin"))
raw = []
removal = None
for k in range(saves):
    path = os.path.join(work, f"raw{k}.bin")
    t0 = time.perf_counter()
    if removal:
        removal.join()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for off in range(0, len(data), 1 << 20):
        os.write(fd, data[off:off + (1 << 20)])
    os.fsync(fd)
    os.close(fd)
    raw.append(time.perf_counter() - t0)
    if k > 0:
        removal = threading.Thread(target=os.remove, args=(os.path.join(work, f"raw{k - 1}.bin"),))
        removal.start()
    time.sleep(pace)
if removal:
    removal.join()
os.remove(os.path.join(work, f"raw{saves - 1}.bin"))
del data
sizes = [(4096, 1024), (4096,), (4096, 4096), (4096,), (4096, 4096), (4096,), (4096, 4096),
         (4096,), (10, 4096), (10,)]
d = {}
for i, s in enumerate(sizes):
    d[f"w{i}"] = torch.randn(s)
    d[f"m{i}"] = torch.randn(s)
path = os.path.join(work, "peer.pt")
for _ in range(2):
    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save(d, f)
        f.flush()
        os.fsync(f.fileno())
    pt_save = time.perf_counter() - t0
    t0 = time.perf_counter()
    torch.load(path)
    pt_load = time.perf_counter() - t0
os.remove(path)
print(f"raw={statistics.median(raw[1:])} pt_save={pt_save} pt_load={pt_load}")
PY
)"
  ROWS+=("$row")
  echo "$row" >&2
done

"$PY" - "$MB" "${ROWS[@]}" <<'PY'
import statistics, sys
mb = float(sys.argv[1])
rounds = [dict(kv.split("=") for kv in line.split()) for line in sys.argv[2:]]
def col(key):
    return [float(r[key]) for r in rounds]
def spread(values, fmt):
    return (fmt % statistics.median(values)) + " (" + (fmt % min(values)) + "-" + (fmt % max(values)) + ")"
raw, pt_save, pt_load = col("raw"), col("pt_save"), col("pt_load")
print(f"checkpoint of {mb:.0f} MB of tensors (MLP 54.6 M parameters + SGD momentum), 1 rank; "
      f"{len(rounds)} round(s): medians over rounds (min-max)")
print(f"the runner's pace: {spread(col('pace'), '%.2f')} s from the end of a save to the start "
      f"of the next (the raw write waits as long)")
print(f"peers: raw write+fsync {spread([mb / x for x in raw], '%.0f')} MB/s; "
      f"torch.save+fsync {spread([mb / x for x in pt_save], '%.0f')} MB/s; "
      f"torch.load {spread([mb / x for x in pt_load], '%.0f')} MB/s")
print("| checkpoint_io | save MB/s | save / raw write (goal >= 0.9) | load MB/s | "
      "load / torch.load (goal >= 2) |")
print("|---|---:|---:|---:|---:|")
names = {"safetensors": "safetensors", "torch": "torch",
         "async": "async (safetensors inside; save in the background)"}
for io, label in names.items():
    save, load = col(io + "_save"), col(io + "_load")
    print(f"| {label} | {spread([mb / s for s in save], '%.0f')} | "
          f"{spread([r / s for r, s in zip(raw, save)], '%.3f')} | "
          f"{spread([mb / l for l in load], '%.0f')} | "
          f"{spread([p / l for p, l in zip(pt_load, load)], '%.3f')} |")
wait, sync = col("async_wait"), col("safetensors_save")
print(f"async: the loop waited {spread(wait, '%.3f')} s per save, "
      f"{spread([w / s for w, s in zip(wait, sync)], '%.3f')} of the synchronous safetensors "
      f"save of the same round (goal <= 0.1)")
PY
