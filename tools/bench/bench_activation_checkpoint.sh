#!/usr/bin/env bash
# Activation checkpointing (activation_checkpoint, issue 39 item 2): what it
# saves and what it costs, against PyTorch's torch.utils.checkpoint on the
# same model in the same run.
#
# The job: gpt vocab 256, block_size (T) 256, dim 256, depth 12, heads 8,
# AdamW, float32, one process, OMP_NUM_THREADS=1, at two batch sizes B and 2B.
# Rows: runner-host without it, with mode full (every unit recomputes) and
# with selective 2 (every second unit); Debian's python3-torch with the same
# layers (tools/bench/pytorch_gpt.py --mode naive: the attention written
# out, as runner-host on LibTorch 1.13 computes it) without and with
# --checkpoint (torch.utils.checkpoint around the embeddings, each block and
# the head, non-reentrant).
#
# Activations per sample: the peak RSS at 2B minus the peak at B, over B. The
# model's state (parameters, gradients, AdamW's moments) and the program do
# not grow with the batch, so what is left is what the batch costs: the
# activations kept for backward and the temporaries at the peak. Step time:
# the median of the steps after the first two (runner-host: each step's
# `time` in metrics.jsonl; PyTorch: each step timed alone).
#
#   tools/bench/bench_activation_checkpoint.sh [B] [iterations]   (defaults 4, 6)
#
# RH_BUILD_DIR: the build (default build/). Prints a markdown table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
B="${1:-4}"
ITERS="${2:-6}"
T=256 DIM=256 DEPTH=12 HEADS=8
[ -x "$BUILD/bin/runner-host" ] || { echo "no runner-host at $BUILD/bin (tools/build.sh)" >&2; exit 2; }
CORES=$(getconf _NPROCESSORS_ONLN)  # before OMP_NUM_THREADS, which nproc honours
WORK="$(mktemp -d /tmp/rh-bench-ac.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1

# rh NAME BATCH SECTION: peak RSS (MiB) and median step (ms) of one run.
rh() {
  local name="$1" batch="$2" section="$3"
  cat > "$WORK/$name.yaml" <<YAML
work_dir: $WORK/$name
seed: 0
model: {type: gpt, vocab_size: 256, block_size: $T, dim: $DIM, depth: $DEPTH, heads: $HEADS}
data:
  train: {dataset: {type: char_lm, path: $ROOT/README.md, block_size: $T, split: train},
          batch_size: $batch, shuffle: true, num_workers: 1}
optim_wrapper: {optimizer: {type: AdamW, lr: 0.0003, weight_decay: 0.1}}
train_cfg: {by_epoch: false, max_iters: $ITERS}
hooks: [{type: metrics}]
$section
YAML
  /usr/bin/time -f "%M" -o "$WORK/$name.rss" "$BUILD/bin/runner-host" --config "$WORK/$name.yaml" \
    > "$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log"; exit 1; }
  /usr/bin/python3 - "$WORK/$name/metrics.jsonl" "$WORK/$name.rss" <<'PY'
import json, statistics, sys
times = [json.loads(l)["time"] for l in open(sys.argv[1]) if '"mode": "train"' in l or '"mode":"train"' in l]
rss = int(open(sys.argv[2]).read().split()[-1]) / 1024
print(f"{rss:.0f} {1000 * statistics.median(times[2:]):.0f}")
PY
}

# py NAME BATCH FLAGS: the same from the PyTorch peer.
py() {
  local out
  out=$(/usr/bin/python3 "$ROOT/tools/bench/pytorch_gpt.py" --device cpu --mode naive \
    --block "$T" --dim "$DIM" --depth "$DEPTH" --heads "$HEADS" --batch "$2" \
    --warmup 2 --steps "$((ITERS - 2))" $3)
  echo "$out" > "$WORK/$1.log"
  awk '{for (i = 1; i < NF; ++i) { if ($i == "rss_mb") r = $(i + 1); if ($i == "median_ms") m = $(i + 1) }
        printf "%.0f %.0f\n", r, m}' <<< "$out"
}

declare -A RSS MS
run_row() {  # ROW KIND ARG
  local row="$1" kind="$2" arg="$3" b r m
  for b in "$B" "$((2 * B))"; do
    read -r r m < <("$kind" "${row}_$b" "$b" "$arg")
    RSS[$row,$b]=$r
    MS[$row,$b]=$m
    echo "bench_activation_checkpoint: $row batch $b: peak ${r} MiB, ${m} ms/step" >&2
  done
}
run_row none rh ""
run_row full rh "activation_checkpoint: {mode: full}"
run_row selective2 rh "activation_checkpoint: {mode: selective, selective_ac_option: 2}"
if /usr/bin/python3 -c "import torch" 2> /dev/null; then
  run_row torch py ""
  run_row torch_checkpoint py "--checkpoint"
  TORCH_VERSION=$(/usr/bin/python3 -c "import torch; print(torch.__version__)")
fi

B2=$((2 * B))
per_sample() { awk -v a="${RSS[$1,$B2]}" -v b="${RSS[$1,$B]}" -v n="$B" 'BEGIN { printf "%.1f", (a - b) / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
echo
echo "Activation checkpointing, gpt T $T, dim $DIM, depth $DEPTH, heads $HEADS, AdamW, float32, one process, OMP_NUM_THREADS=1, batch $B and $B2, $ITERS iterations ($CORES cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'); $(date -u +%F)):"
echo
echo "| run | peak RSS at $B / $B2, MiB | activations per sample, MiB | vs without | ms/step at $B2 | vs without |"
echo "|---|---:|---:|---:|---:|---:|"
row() {  # ROW LABEL BASE
  local a base
  a=$(per_sample "$1")
  base=$(per_sample "$3")
  echo "| $2 | ${RSS[$1,$B]} / ${RSS[$1,$B2]} | $a | $(ratio "$a" "$base") | ${MS[$1,$B2]} | $(ratio "${MS[$1,$B2]}" "${MS[$3,$B2]}") |"
}
row none "runner-host, activation_checkpoint none" none
row full "runner-host, mode full" none
row selective2 "runner-host, mode selective, selective_ac_option 2" none
if [ -n "${TORCH_VERSION:-}" ]; then
  row torch "PyTorch $TORCH_VERSION eager" torch
  row torch_checkpoint "PyTorch $TORCH_VERSION, torch.utils.checkpoint on every unit" torch
fi
echo
none=$(per_sample none)
full=$(per_sample full)
echo "Goals (issue 39): activations with full >= 3x smaller: $(ratio "$none" "$full")x ($(awk -v r="$(ratio "$none" "$full")" 'BEGIN { print (r >= 3 ? "met" : "MISSED") }')); step time <= 1.4x: $(ratio "${MS[full,$B2]}" "${MS[none,$B2]}")x ($(awk -v r="$(ratio "${MS[full,$B2]}" "${MS[none,$B2]}")" 'BEGIN { print (r <= 1.4 ? "met" : "MISSED") }'))"
