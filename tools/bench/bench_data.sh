#!/usr/bin/env bash
# runner-host's data loader against PyTorch's DataLoader + torchvision and
# against the decode limit on the same JPEG folder, workers and transforms,
# in one run; then its token datasets against a bare memcpy (issue 40,
# item 6). Goals: runner-host >= 1.5 x torchvision, >= 0.8 x the decode limit.
#
#   tools/bench/bench_data.sh [WORKERS] [IMAGES]      (after tools/build.sh)
#     WORKERS  loader threads / worker processes / decoding threads (default 2)
#     IMAGES   JPEGs in the folder (default 2000), 10 classes
#
# Images: tools/data/make_image_folder.py writes an ImageNet-like folder
# (mostly 500x375, ~115 KB a file; MMPretrain's CustomDataset layout), kept
# in RH_BENCH_DATA_CACHE (default ~/.cache/runner-host/bench_data; ~230 MiB
# for 2000 images, made in ~10 s on 2 idle cores) under a name made of its
# parameters and the generator's hash, as the token files are. Rows, each
# its own process, in alternating order round after round (RH_BENCH_ROUNDS,
# default 3), each counting what follows a warm-up epoch (RH_BENCH_EPOCHS a
# run, default 2: the warm-up and one measured):
#   decode limit        build/bin/rh_bench_decode: libjpeg-turbo decoding
#                       every file (read each time) on WORKERS threads, nothing else
#   runner-host loader  build/bin/rh_bench_data on a job of `type:
#                       CustomDataset` with LoadImageFromFile, RandomResizedCrop
#                       224, RandomFlip 0.5 horizontal, PackInputs (and the
#                       job's data_preprocessor: ImageNet's mean/std, to_rgb)
#   torchvision         tools/bench/data_peer.py: ImageFolder, RandomResizedCrop
#                       224 + RandomHorizontalFlip + ToTensor + Normalize
#                       (/usr/bin/python3: Debian's torch 1.13, torchvision 0.14)
# all with batch RH_BENCH_BATCH (default 64), shuffle, drop_last, WORKERS
# workers, 2 batches prefetched per worker (prefetch_factor, PyTorch's
# default) and persistent workers. runner-host normalises the batch in its
# main thread (the data_preprocessor, where its training thread does it),
# torchvision each image in the workers (Normalize): both are timed. A row
# that cannot run says why ("not available: ...") and the others go on.
#
# Tokens: a token file of RH_BENCH_TOKEN_MB MiB (default 200; uint16, vocab
# 50257, random ids), read as `token_bin` and, with a Megatron .idx cutting
# it into documents of 100-4000 tokens, as `megatron_indexed`: block_size
# 1024, batch 32, shuffle, WORKERS workers. rh_bench_data --memcpy-peer
# alternates the loader's epochs with those of a bare memcpy of the bytes
# it delivers (DataLoaderBench.cpp); the ratio is the loader's tokens/s
# over the memcpy's.
#
# Figures are medians over rounds (a run hit by another job's burst is an
# outlier); the load average before and after says how busy the machine was.
# OMP_NUM_THREADS=1: the loader's threads and PyTorch's worker processes
# (which set 1 thread themselves) are the only ones working, WORKERS cores.
# RH_BUILD_DIR: the build (default build/). RH_BENCH_KEEP=1 keeps the work
# folder (jobs and every run's output).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
WORKERS="${1:-2}"
IMAGES="${2:-2000}"
ROUNDS="${RH_BENCH_ROUNDS:-3}"
EPOCHS="${RH_BENCH_EPOCHS:-2}"
BATCH="${RH_BENCH_BATCH:-64}"
TOKEN_MB="${RH_BENCH_TOKEN_MB:-200}"
CACHE="${RH_BENCH_DATA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/runner-host/bench_data}"
PY=/usr/bin/python3
CLASSES=10
export OMP_NUM_THREADS=1

for n in "$WORKERS" "$IMAGES" "$ROUNDS" "$EPOCHS" "$BATCH" "$TOKEN_MB"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "bench_data.sh: expected a number, got '$n'" >&2; exit 2; }
done
if ((WORKERS < 1 || ROUNDS < 1 || EPOCHS < 2 || TOKEN_MB < 1 || BATCH < 1 || IMAGES / CLASSES * CLASSES < BATCH)); then
  echo "bench_data.sh: WORKERS, rounds and batch >= 1, epochs >= 2, token MiB >= 1," \
    "IMAGES >= the batch ($BATCH; IMAGES counts in tens)" >&2
  exit 2
fi
"$PY" -c 'import numpy, PIL' 2> /dev/null ||
  { echo "bench_data.sh: $PY needs numpy and PIL (apt-get install python3-numpy python3-pil)" >&2; exit 2; }
WORK="$(mktemp -d)"
if [ -n "${RH_BENCH_KEEP:-}" ]; then
  echo "bench_data.sh: keeping $WORK (RH_BENCH_KEEP)" >&2
else
  trap 'rm -rf "$WORK"' EXIT
fi

# The image folder, made once for its parameters and the generator's code.
PER_CLASS=$((IMAGES / CLASSES))
GEN="$ROOT/tools/data/make_image_folder.py"
FOLDER="$CACHE/images-${CLASSES}x$PER_CLASS-seed0-$(md5sum < "$GEN" | cut -c1-8)"
if [ ! -f "$FOLDER/.complete" ]; then
  rm -rf "$FOLDER" && mkdir -p "$FOLDER"
  "$PY" "$GEN" "$FOLDER/train" --classes "$CLASSES" --per-class "$PER_CLASS" --seed 0 \
    --ann-file "$FOLDER/train.txt" --meta "$FOLDER/classes.txt" > "$FOLDER/.complete.tmp"
  mv "$FOLDER/.complete.tmp" "$FOLDER/.complete"
fi

# The token files: tokens.bin (token_bin) and the same ids as a Megatron
# indexed dataset (megatron.bin, a hard link to it, and megatron.idx).
TOKEN_GEN='import os, struct, sys
import numpy as np
out, mib = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
n = mib * 2**20 // 2
rng.integers(0, 50257, n, dtype=np.uint16).tofile(out + "/tokens.bin")
lengths = rng.integers(100, 4001, n // 100 + 2).astype(np.int64)
ends = np.cumsum(lengths)
k = int(np.searchsorted(ends, n))  # the first document that reaches the end
lengths = lengths[:k + 1]
lengths[-1] -= ends[k] - n
pointers = np.concatenate([[0], np.cumsum(lengths[:-1])]) * 2  # bytes, uint16 ids
with open(out + "/megatron.idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8))  # version 1, uint16
    f.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(lengths) + 1))
    f.write(lengths.astype(np.int32).tobytes() + pointers.astype(np.int64).tobytes())
    f.write(np.arange(len(lengths) + 1, dtype=np.int64).tobytes())
print(f"{n} tokens, {len(lengths)} documents")'
TOKENS="$CACHE/tokens-${TOKEN_MB}MiB-seed0"
if [ ! -f "$TOKENS/.complete" ]; then
  rm -rf "$TOKENS" && mkdir -p "$TOKENS"
  "$PY" -c "$TOKEN_GEN" "$TOKENS" "$TOKEN_MB" > "$TOKENS/.complete.tmp"
  ln -f "$TOKENS/tokens.bin" "$TOKENS/megatron.bin" 2> /dev/null || cp "$TOKENS/tokens.bin" "$TOKENS/megatron.bin"
  mv "$TOKENS/.complete.tmp" "$TOKENS/.complete"
fi

cat > "$WORK/images.yaml" << YAML
seed: 0
data_preprocessor: {mean: [123.675, 116.28, 103.53], std: [58.395, 57.12, 57.375], to_rgb: true}
data:
  train:
    dataset:
      type: CustomDataset
      data_root: $FOLDER/train
      pipeline:
        - {type: LoadImageFromFile}
        - {type: RandomResizedCrop, scale: 224}
        - {type: RandomFlip, prob: 0.5, direction: horizontal}
        - {type: PackInputs}
    batch_size: $BATCH
    shuffle: true
    drop_last: true
    num_workers: $WORKERS
    prefetch_factor: 2
    persistent_workers: true
YAML
token_job() {  # FILE DATASET
  cat > "$1" << YAML
seed: 0
data:
  train: {dataset: $2, batch_size: 32, shuffle: true, drop_last: true,
          num_workers: $WORKERS, prefetch_factor: 2, persistent_workers: true}
YAML
}
token_job "$WORK/token_bin.yaml" "{type: token_bin, path: $TOKENS/tokens.bin, block_size: 1024, vocab_size: 50257}"
token_job "$WORK/megatron_indexed.yaml" \
  "{type: megatron_indexed, path_prefix: $TOKENS/megatron, block_size: 1024, vocab_size: 50257}"

# Why ROW cannot run here, or nothing.
why_not() {
  case "$1" in
    decode) [ -x "$BUILD/bin/rh_bench_decode" ] ||
      echo "no $BUILD/bin/rh_bench_decode (cmake --build build --target rh_bench_decode)" ;;
    rh | token_bin | megatron_indexed) [ -x "$BUILD/bin/rh_bench_data" ] ||
      echo "no $BUILD/bin/rh_bench_data (cmake --build build --target rh_bench_data)" ;;
    torchvision) "$PY" -c 'import torch, torchvision' 2> /dev/null ||
      echo "$PY cannot import torch and torchvision (apt-get install python3-torchvision)" ;;
  esac
}
# The sed script that picks ROW's figure from its output (images/s; for
# tokens, loader / memcpy).
figure_pattern() {
  case "$1" in
    decode) printf '%s' 's/^decode limit: \([0-9.]*\) images\/s.*/\1/p' ;;
    rh) printf '%s' 's/^runner-host loader: \([0-9.]*\) examples\/s.*/\1/p' ;;
    torchvision) printf '%s' 's/^torchvision DataLoader: \([0-9.]*\) images\/s.*/\1/p' ;;
    *) printf '%s' 's/^loader \/ memcpy peer: \([0-9.]*\)$/\1/p' ;;
  esac
}
# ROW R: runs ROW once (round R, its output in $WORK/ROW.R.log) and adds its
# figure to RUNS[ROW], or the reason it failed to FAILED[ROW] (the first).
declare -A RUNS FAILED
measure() {
  local row=$1 log="$WORK/$1.$2.log" why figure="" cmd
  why=$(why_not "$row")
  if [ -z "$why" ]; then
    case "$row" in
      decode) cmd=("$BUILD/bin/rh_bench_decode" --dir "$FOLDER/train" --threads "$WORKERS"
        --rounds $((EPOCHS - 1))) ;;
      rh) cmd=("$BUILD/bin/rh_bench_data" --config "$WORK/images.yaml" --epochs "$EPOCHS") ;;
      torchvision) cmd=("$PY" "$ROOT/tools/bench/data_peer.py" "$FOLDER/train" --workers "$WORKERS"
        --batch-size "$BATCH" --epochs "$EPOCHS") ;;
      *) cmd=("$BUILD/bin/rh_bench_data" --config "$WORK/$row.yaml" --epochs $((EPOCHS + 1))
        --memcpy-peer) ;;
    esac
    "${cmd[@]}" > "$log" 2>&1 && figure=$(sed -n "$(figure_pattern "$row")" "$log")
    [ -n "$figure" ] || why=$(grep -v '^\s*$' "$log" | tail -1 | cut -c1-300)
  fi
  if [ -n "$figure" ]; then
    RUNS[$row]+="$figure "
  elif [ -z "${FAILED[$row]:-}" ]; then
    FAILED[$row]=${why:-"no output"}
  fi
}
median() {  # NUMBERS...
  printf '%s\n' "$@" | sort -g |
    awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
# ROW: its median, or "!reason" when a run failed.
figure() {
  local runs
  read -ra runs <<< "${RUNS[$1]:-}"
  if [ -n "${FAILED[$1]:-}" ]; then echo "!${FAILED[$1]}"; else median "${runs[@]}"; fi
}
row() {  # LABEL ROW
  local f
  f=$(figure "$2")
  if [[ "$f" == !* ]]; then
    printf "  %-38s not available: %s\n" "$1" "${f#!}"
  else
    printf "  %-38s %10.1f  (%s)\n" "$1" "$f" "${RUNS[$2]% }"
  fi
}
ratio_row() {  # LABEL ROW_A ROW_B GOAL
  local a b
  a=$(figure "$2")
  b=$(figure "$3")
  if [[ "$a" == !* || "$b" == !* ]]; then
    printf "  %-38s %10s  (a figure is missing)\n" "$1" "-"
  else
    awk -v label="$1" -v a="$a" -v b="$b" -v goal="$4" 'BEGIN {
      r = a / b
      verdict = goal == "" ? "" : sprintf("  goal >= %s: %s", goal, r >= goal ? "met" : "missed")
      printf "  %-38s %10.3f%s\n", label, r, verdict }'
  fi
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2 == 0)); then order=(decode rh torchvision); else order=(torchvision rh decode); fi
  for row in "${order[@]}" token_bin megatron_indexed; do measure "$row" "$r"; done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

echo "bench_data.sh: $WORKERS workers, $ROUNDS round$( ((ROUNDS == 1)) || echo s) (alternating order), medians;" \
  "OMP_NUM_THREADS=1"
echo "images: $(sed 's/ ([0-9.]* s)$//' "$FOLDER/.complete")"
echo "  batch $BATCH, shuffle, drop_last; RandomResizedCrop 224 + horizontal flip + normalize;"
echo "  $EPOCHS epochs a run, the first a warm-up"
printf "  %-38s %10s  %s\n" "" "images/s" "(runs)"
row "decode limit (libjpeg-turbo alone)" decode
row "runner-host loader" rh
row "torchvision DataLoader" torchvision
ratio_row "runner-host / torchvision" rh torchvision 1.5
ratio_row "runner-host / decode limit" rh decode 0.8
ratio_row "torchvision / decode limit" torchvision decode ""
# What rh_bench_data says it left out of its loop (the data_preprocessor).
[ -n "${FAILED[rh]:-}" ] || sed -n 's/^note: /  runner-host: /p' "$WORK/rh.0.log"

echo "tokens: $(cat "$TOKENS/.complete") (uint16, $TOKEN_MB MiB), block_size 1024, batch 32,"
echo "  shuffle, drop_last; $((EPOCHS + 1)) epochs a run, the first a warm-up; each loader epoch"
echo "  followed by one of the memcpy peer (the bytes it delivers: 2 x 1024 int64 an example)"
printf "  %-38s %12s  %12s  %s\n" "" "loader" "memcpy peer" "loader / memcpy (runs)"
for ds in token_bin megatron_indexed; do
  if [ -n "${FAILED[$ds]:-}" ]; then
    row "$ds" "$ds"
    continue
  fi
  loader=() peer=()
  for ((r = 0; r < ROUNDS; r++)); do
    loader+=("$(sed -n 's/^runner-host loader: .*, \([0-9]*\) tokens\/s.*/\1/p' "$WORK/$ds.$r.log")")
    peer+=("$(sed -n 's/^memcpy peer: \([0-9]*\) tokens\/s.*/\1/p' "$WORK/$ds.$r.log")")
  done
  awk -v ds="$ds" -v l="$(median "${loader[@]}")" -v p="$(median "${peer[@]}")" \
    -v f="$(figure "$ds")" -v runs="${RUNS[$ds]% }" \
    'BEGIN { printf "  %-38s %9.1f M/s  %9.1f M/s  %.3f (%s)\n", ds, l / 1e6, p / 1e6, f, runs }'
done
echo "load average: $load_before before, $load_after after" \
  "($(env -u OMP_NUM_THREADS nproc) CPUs: above $WORKERS, the figures are noisy)"
