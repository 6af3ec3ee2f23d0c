#!/usr/bin/env bash
# runner-host on a GPU against PyTorch eager in the same run (issue 30): the
# built-in gpt and its PyTorch twin (tools/bench/pytorch_gpt.py: the same
# layers and shapes, AdamW), at two sizes:
#   large  768 x 12 blocks, 12 heads, T 256, batch 32 (85 M parameters)
#   small  256 x 4 blocks, 4 heads, T 128, batch 32 (3.3 M: launch-bound)
# runner-host: single in float32, single with AmpOptimWrapper (bfloat16),
# the same with AdamW `fused: true`, ddp on one rank (--nproc-per-node 1, a
# real world of one: NCCL) in float32 and with AMP, zero stage 2 with its
# own bf16 and fsdp with mixed_precision bf16 (one rank). PyTorch: float32
# with the same attention math (naive), with scaled_dot_product_attention
# (sdpa), and SDPA under torch.autocast(bfloat16) (sdpa_bf16: what a PyTorch
# user writes), and sdpa_bf16_sync: the same reading the loss every step
# (loss.item(), as runner-host and MMEngine do to log it: no step runs ahead
# of the GPU). ms/step: runner-host's median `time` metric over the
# iterations after the first 10 (each iteration ends reading the loss: the
# GPU's work is in it; data loading is in it too); PyTorch's mean over 40
# steps after 10, synchronised at the end.
# Peak memory: cuda_peak_allocated_mb / torch.cuda.max_memory_allocated.
#
#   tools/bench/bench_gpu.sh [large|small|both] (after a CUDA build; default both)
#
# RH_BENCH_PY: the python with torch (default python3); RH_BENCH_DEVICE=cpu
# runs the plumbing on the CPU with a tiny model (a smoke test, no figures).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
RH="$BUILD/bin/runner-host"
PY="${RH_BENCH_PY:-python3}"
DEVICE="${RH_BENCH_DEVICE:-cuda}"
WHICH="${1:-both}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
ITERS=50  # 10 warm-up + 40 measured
cat "$ROOT"/host/*/*.cpp "$ROOT"/plugins/*/*/*.cpp "$ROOT"/README.md > "$WORK/text.txt"

# ms/step and peak MiB from a run's metrics.jsonl.
summary() {
  "$PY" - "$1" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"train"' in l]
times = [l["time"] for l in lines[10:]] or [l["time"] for l in lines]
peak = max((l.get("cuda_peak_allocated_mb", float("nan")) for l in lines), default=float("nan"))
print(f"{statistics.median(times) * 1000:.2f} {peak:.0f} {lines[-1]['loss']:.3f}")
PY
}

job() {  # NAME T D L H B STRATEGY OPTIM
  cat > "$WORK/$1.yaml" <<YAML
work_dir: $WORK/$1
seed: 0
model: {type: gpt, vocab_size: 256, block_size: $2, dim: $3, depth: $4, heads: $5}
data:
  train: {dataset: {type: char_lm, path: $WORK/text.txt, block_size: $2}, batch_size: $6,
          shuffle: true, num_workers: 2}
optim_wrapper: $8
train_cfg: {by_epoch: false, max_iters: $ITERS}
strategy: $7
hooks: [{type: metrics}]
YAML
}

ratio() {  # A B FORMAT: A / B, or "-" unless both are numbers > 0
  awk -v a="$1" -v b="$2" -v f="$3" 'BEGIN {
    if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && a + 0 > 0 && b + 0 > 0) printf f, a / b; else print "-" }'
}

row() {  # LABEL RESULT(ms peak loss) REFERENCE_MS
  local ms peak loss
  read -r ms peak loss <<< "$2"
  printf '| %s | %s | %s | %s | %s |\n' "$1" "$ms" \
    "$(ratio "$ms" "$3" %.2f)" \
    "$peak" "$loss"
}

size() {  # LABEL T D L H B
  local label=$1 T=$2 D=$3 L=$4 H=$5 B=$6
  local adamw="{type: AdamW, lr: 0.0003, weight_decay: 0.1}"
  local fused="{type: AdamW, lr: 0.0003, weight_decay: 0.1, fused: true}"
  local amp="{type: AmpOptimWrapper, dtype: bfloat16, optimizer:"
  declare -A res
  declare -a order=()
  run_rh() {  # KEY STRATEGY OPTIM [launcher args]
    local key=$1 strategy=$2 optim=$3
    shift 3
    job "$label-$key" "$T" "$D" "$L" "$H" "$B" "$strategy" "$optim"
    if "$RH" --config "$WORK/$label-$key.yaml" "$@" > "$WORK/$label-$key.log" 2>&1; then
      res[$key]=$(summary "$WORK/$label-$key/metrics.jsonl")
    else
      res[$key]="FAILED - -"
      grep -m3 -iE "error|what" "$WORK/$label-$key.log" | sed "s/^/  $key: /" >&2
    fi
    order+=("$key")
  }
  run_rh single_fp32 "{type: single}" "{optimizer: $adamw}"
  run_rh single_amp "{type: single}" "$amp $adamw}"
  run_rh single_amp_fused "{type: single}" "$amp $fused}"
  run_rh ddp1_fp32 "{type: ddp}" "{optimizer: $adamw}" --nproc-per-node 1
  run_rh ddp1_amp_fused "{type: ddp}" "$amp $fused}" --nproc-per-node 1
  run_rh zero2_bf16 "{type: zero, zero_optimization: {stage: 2}, bf16: {enabled: true}}" \
    "{optimizer: $adamw}" --nproc-per-node 1
  run_rh fsdp_bf16 "{type: fsdp, mixed_precision: {param_dtype: bfloat16, reduce_dtype: float32}}" \
    "{optimizer: $adamw}" --nproc-per-node 1
  local mode out
  for mode in naive sdpa sdpa_bf16 sdpa_bf16_sync; do
    out=$("$PY" "$ROOT/tools/bench/pytorch_gpt.py" --block "$T" --dim "$D" --depth "$L" --heads "$H" \
      --batch "$B" --mode "${mode%_sync}" ${mode/*_sync/--sync} --device "$DEVICE" 2>&1 | tail -1)
    if [[ $out =~ ms_per_step\ ([0-9.]+)\ peak_mib\ ([0-9a-z]+) ]]; then
      res[py_$mode]="${BASH_REMATCH[1]} ${BASH_REMATCH[2]} -"
    else
      res[py_$mode]="FAILED - -"
      echo "  pytorch $mode: $out" >&2
    fi
  done
  local ref=${res[py_sdpa_bf16]%% *} ref32=${res[py_sdpa]%% *} single=${res[single_fp32]%% *}
  echo
  echo "### gpt $label: dim $D, $L blocks, $H heads, T $T, batch $B"
  echo
  echo "| run | ms/step | / PyTorch SDPA+bf16 | peak MiB | last loss |"
  echo "|---|---:|---:|---:|---:|"
  for key in "${order[@]}"; do row "runner-host $key" "${res[$key]}" "$ref"; done
  for mode in naive sdpa sdpa_bf16 sdpa_bf16_sync; do
    row "PyTorch eager $mode" "${res[py_$mode]}" "$ref"
  done
  echo
  local s=${res[single_amp_fused]%% *} d=${res[ddp1_amp_fused]%% *} d32=${res[ddp1_fp32]%% *}
  echo "ddp on one rank / single: float32 $(ratio "$d32" "$single" %.3f), AMP + fused AdamW" \
    "$(ratio "$d" "$s" %.3f); runner-host float32 / PyTorch SDPA float32: $(ratio "$single" "$ref32" %.3f)"
}

echo "## GPU: runner-host against PyTorch eager ($(date -u '+%F %H:%M') UTC)"
echo
if [ "$DEVICE" = cuda ]; then
  nvidia-smi -L 2>/dev/null | head -1
  "$PY" -c 'import torch; print("PyTorch", torch.__version__, "CUDA", torch.version.cuda)'
fi
if [ "$DEVICE" = cpu ]; then  # the plumbing only
  size tiny 32 64 2 2 4
else
  [[ $WHICH == both || $WHICH == large ]] && size large 256 768 12 12 32
  [[ $WHICH == both || $WHICH == small ]] && size small 128 256 4 4 32
fi
