#!/usr/bin/env bash
# Tensor parallelism against PyTorch 2.6's own in one run (issue 42), both on
# the Debian 13 chroot's LibTorch / python3-torch 2.6, the CPU, Gloo:
#   runner-host  the built-in llama under `strategy: {type: ddp,
#                tensor_parallel: {size: 2}}` on 2 ranks (the default plan:
#                torchtitan's), and under ddp on 1 rank (the whole model)
#   PyTorch      pytorch_tp.py: the same llama layer for layer,
#                parallelize_module with torchtitan's Colwise/RowwiseParallel
#                plan on a 2-rank DeviceMesh (DTensor)
# The llama: vocab 256, T 64, dim 512, 8 layers, 8 heads, 4 key/value heads,
# multiple_of 64 (hidden 1408), rope_theta 500000: 23.9 M parameters; batch
# 4 per TP group; AdamW; float32; OMP_NUM_THREADS=1 (2 ranks on 2 cores).
#
#   tools/bench/bench_tp.sh [iterations] [rounds]    (as root)
#   tools/bench/bench_tp.sh --why-not                why it cannot run here
#     iterations  per job (default 12, the first 2 left out)
#     rounds      every job once per round (A B C A B C ...); figures: the
#                 median over rounds (default 1)
#
# Figures: ms/step is the median step after the first 2: runner-host's
# `time` metric (metrics hook), pytorch_tp.py's own median (each step after
# a barrier). Bytes per rank: rank 0's parameters + optimizer state
# (runner-host's memory/params_mb + memory/optimizer_mb of the last step;
# PyTorch's local shards of the parameters and of AdamW's exp_avg and
# exp_avg_sq). Ratios: runner-host / PyTorch (< 1: runner-host faster or
# smaller), and TP 2 / the whole model's bytes.
#
# Needs: root, the chroot and a LibTorch 2.6 build (torch26_common.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH="$ROOT/tools/bench"
# shellcheck source=tools/bench/torch26_common.sh
source "$BENCH/torch26_common.sh"  # BUILD26, CHROOT, in_chroot, t26_start
WARM=2
DIMS=(--vocab 256 --block 64 --dim 512 --layers 8 --heads 8 --kv-heads 4 --multiple-of 64 --batch 4)

llama_job() {  # FILE ITERS
  cat > "$1" <<YAML
seed: 0
model: {type: llama, vocab_size: 256, dim: 512, n_layers: 8, n_heads: 8, n_kv_heads: 4,
        multiple_of: 64, rope_theta: 500000, max_seq_len: 64}
data:
  train: {dataset: {type: char_lm, path: $ROOT/README.md, block_size: 64, split: train},
          batch_size: 4, shuffle: true, num_workers: 1}
optim_wrapper: {optimizer: {type: AdamW, lr: 0.0001, weight_decay: 0.1}}
train_cfg: {by_epoch: false, max_iters: $2}
hooks: [{type: metrics}]
YAML
}

# Inside the chroot: one round's three jobs, each's figures on a line of
# DIR/figures: NAME MS BYTES.
if [ "${1:-}" = --inside ]; then
  dir=$2 iters=$3 build26=$4 round=$5
  export OMP_NUM_THREADS=1
  llama_job "$dir/llama.yaml" "$iters"
  figures() {  # NAME WORK_DIR: median time after WARM, last step's params + optimizer bytes
    python3 - "$1" "$2/metrics.jsonl" "$WARM" >> "$dir/figures" <<'PY'
import json, statistics, sys
name, path, warm = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(l) for l in open(path) if '"train"' in l]
ms = 1e3 * statistics.median(r["time"] for r in rows[warm:])
last = rows[-1]
print(name, f"{ms:.1f}", int(round((last["memory/params_mb"] + last["memory/optimizer_mb"]) * 1024 * 1024)))
PY
  }
  rh() {  # NAME RANKS STRATEGY
    "$build26/bin/runner-host" --config "$dir/llama.yaml" --nproc-per-node "$2" \
      --set "work_dir=$dir/$1.$round" --set "strategy=$3" > "$dir/$1.$round.log" 2>&1 ||
      { tail -5 "$dir/$1.$round.log" >&2; exit 1; }
    figures "$1" "$dir/$1.$round"
  }
  rh rh_tp2 2 "{type: ddp, tensor_parallel: {size: 2}}"
  rh rh_whole 1 "{type: ddp}"
  (cd "$BENCH" && python3 pytorch_tp.py --ranks 2 "${DIMS[@]}" --warmup "$WARM" \
     --iters $((iters - WARM)) > "$dir/pt.$round.log" 2>&1) || { tail -5 "$dir/pt.$round.log" >&2; exit 1; }
  sed -n 's/^pytorch tp: \([0-9.]*\) ms.*per rank \([0-9]*\) .*/pt_tp2 \1 \2/p' "$dir/pt.$round.log" >> "$dir/figures"
  exit 0
fi

why_not() { t26_why_not; }
ITERS=12 ROUNDS=1 WHY=0
[ "${1:-}" = --why-not ] && WHY=1 || { ITERS="${1:-12}"; ROUNDS="${2:-1}"; }
t26_start bench_tp "$WHY"
echo "    tools/bench/bench_tp.sh $ITERS $ROUNDS"
echo
echo "The llama (vocab 256, T 64, dim 512, 8 layers, 8 heads / 4 key/value heads, hidden 1408:"
echo "23.9 M parameters), batch 4 per tensor-parallel group, AdamW, float32; 2 ranks on"
echo "$(nproc --all) cores, OMP_NUM_THREADS=1; $ITERS iterations ($WARM left out), $ROUNDS round(s), $(date -u +%F);"
echo "runner-host built against the chroot's LibTorch 2.6, PyTorch 2.6 (python3-torch)."
echo
echo '```'
for ((r = 1; r <= ROUNDS; r++)); do
  in_chroot bash "$BENCH/bench_tp.sh" --inside "$WORK" "$ITERS" "$BUILD26" "$r"
done
python3 - "$WORK/figures" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, ms, b = line.split()
    rows.setdefault(name, []).append((float(ms), int(b)))
med = {k: (statistics.median(m for m, _ in v), v[-1][1]) for k, v in rows.items()}
print(f"{'':34} {'ms/step':>9} {'param+optim bytes, rank 0':>26}")
for k, what in [("rh_tp2", "runner-host ddp x TP 2, 2 ranks"), ("pt_tp2", "PyTorch 2.6 parallelize_module, 2"),
                ("rh_whole", "runner-host ddp, 1 rank (whole)")]:
    print(f"{what:34} {med[k][0]:9.1f} {med[k][1]:26d}")
print(f"step time  runner-host TP 2 / PyTorch TP 2: {med['rh_tp2'][0] / med['pt_tp2'][0]:.2f}")
print(f"bytes      runner-host TP 2 / PyTorch TP 2: {med['rh_tp2'][1] / med['pt_tp2'][1]:.3f}")
print(f"bytes      runner-host TP 2 / whole model:  {med['rh_tp2'][1] / med['rh_whole'][1]:.3f}")
PY
echo '```'
