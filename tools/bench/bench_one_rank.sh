#!/usr/bin/env bash
# A world of one costs nothing (issue 30): ddp, zero (stages 1-3) and fsdp
# started on one rank (--nproc-per-node 1: a real world of one, with its
# rendezvous and communicator) against `single`, the same job in the same
# run. Each round runs single and the strategy back to back, alternating
# which goes first, pinned to one CPU with one intra-op thread; the figure
# is the median over rounds of the paired ratio of the train loop's
# ms/iteration (runner-host's own `train loop:` line: start-up and
# rendezvous left out), with the rounds' min-max.
#
#   tools/bench/bench_one_rank.sh [rounds] [models]   (after tools/build.sh)
#     rounds  pairs per strategy and model (default 9)
#     models  quickstart and/or gpt (default "quickstart gpt")
#
# quickstart: configs/quickstart.yaml (MLP 32-128-128-10, batch 64, 1280
#   iterations; the loop's overhead shows), hooks and validation off.
# gpt: 2 blocks of dim 128, T 32, batch 8 (0.4 M parameters), 100
#   iterations (compute shows).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
ROUNDS="${1:-9}"
MODELS="${2:-quickstart gpt}"
RH="$BUILD/bin/runner-host"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1
# The last CPU this process may use (a cpuset need not start at 0).
CPU="${RH_BENCH_CPU:-$(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' | tail -1 | sed 's/.*-//')}"

cat > "$WORK/gpt.yaml" <<YAML
seed: 0
model: {type: gpt, vocab_size: 256, block_size: 32, dim: 128, depth: 2, heads: 4}
data:
  train: {dataset: {type: char_lm, path: $ROOT/README.md, block_size: 32, split: train},
          batch_size: 8, shuffle: true, num_workers: 0}
optim_wrapper: {optimizer: {type: AdamW, lr: 0.001, weight_decay: 0.1}}
train_cfg: {by_epoch: false, max_iters: 100}
strategy: {type: single}
hooks: []
YAML

ms_per_iter() {  # $1 = model, $2 = run name, rest: --set arguments
  local model=$1 name=$2 cfg
  shift 2
  if [ "$model" = quickstart ]; then cfg="$ROOT/configs/quickstart.yaml"; else cfg="$WORK/gpt.yaml"; fi
  local args=(--config "$cfg" --set work_dir="$WORK/$name" --set "hooks=[]")
  [ "$model" = quickstart ] && args+=(--set train_cfg.val_interval=1000)
  taskset -c "$CPU" "$RH" "${args[@]}" "$@" > "$WORK/$name.log" 2>&1 || { cat "$WORK/$name.log" >&2; exit 1; }
  rm -rf "${WORK:?}/$name"
  sed -n 's/.*train loop: .* (\([0-9.]*\) ms\/iteration.*/\1/p' "$WORK/$name.log"
}

echo "one rank against single: $ROUNDS alternating pairs each, CPU $CPU, OMP_NUM_THREADS=1; $(date -u '+%F %H:%M') UTC, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-11s %-14s %12s %12s %8s %s\n' model strategy single_ms strategy_ms ratio "min-max"
for model in $MODELS; do
  for strategy in "ddp" "zero:1" "zero:2" "zero:3" "fsdp"; do
    sets=(--set "strategy.type=${strategy%%:*}" --nproc-per-node 1)
    [[ $strategy == zero:* ]] && sets+=(--set "strategy.zero_optimization.stage=${strategy#zero:}")
    ratios=() singles=() others=()
    for ((r = 0; r < ROUNDS; r++)); do
      if ((r % 2 == 0)); then
        a=$(ms_per_iter "$model" s)
        b=$(ms_per_iter "$model" x "${sets[@]}")
      else
        b=$(ms_per_iter "$model" x "${sets[@]}")
        a=$(ms_per_iter "$model" s)
      fi
      [[ $a =~ ^[0-9.]+$ && $b =~ ^[0-9.]+$ ]] || { echo "a run failed (above)" >&2; exit 1; }
      singles+=("$a") others+=("$b") ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.4f", b / a}')")
    done
    median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{print v[int((NR+1)/2)]}'; }
    lo=$(printf '%s\n' "${ratios[@]}" | sort -g | head -1)
    hi=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1)
    printf '%-11s %-14s %12s %12s %8s %s\n' "$model" "$strategy" "$(median "${singles[@]}")" \
      "$(median "${others[@]}")" "$(median "${ratios[@]}")" "$lo-$hi"
  done
done
