#!/usr/bin/env bash
# Instructions per training iteration, counted by valgrind (callgrind): the
# bare LibTorch loop of rh_bench_step_overhead against runner-host without
# hooks and with the shipped per-iteration hooks. Instruction counts do not
# depend on the machine's load, so this is the noise-free side of issue 14's
# wall-clock benchmark (rh_bench_step_overhead): what the runner's own work
# adds, though not what it costs in time (an instruction of sgemm and one of
# malloc take different times; system calls count as one instruction).
#
#   tools/bench/step_instructions.sh [config (configs/quickstart.yaml)]  (after tools/build.sh)
#
# Each variant runs twice under callgrind, for 1 and for 3 epochs of 32
# iterations (the job's train set cut to 2048 samples: valgrind runs
# LibTorch ~50x slower), one intra-op thread; the difference of the two
# totals over the 64 iterations between them is the per-iteration count,
# start-up and teardown cancelled. Both threads are counted (the loop and
# the loader). Checkpoint saves are left out: their cost is file system
# time (fsync), which the wall-clock benchmark measures.
# Needs valgrind (apt-get install valgrind); takes 10-20 min (22 min here with
# other work running).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CONFIG="${1:-$ROOT/configs/quickstart.yaml}"
BIN="$ROOT/build/bin"
command -v valgrind > /dev/null || {
  echo "step_instructions.sh: needs valgrind (apt-get install valgrind)" >&2
  exit 1
}
[ -x "$BIN/runner-host" ] && [ -x "$BIN/rh_bench_step_overhead" ] || {
  echo "step_instructions.sh: build first (tools/build.sh)" >&2
  exit 1
}
WORK="$(mktemp -d /tmp/rh-step-instructions.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
g++ -O2 -shared -fPIC "$ROOT/tools/bench/hwy_timer_shim.cpp" -o "$WORK/hwy_timer_shim.so"
export OMP_NUM_THREADS=1
SAMPLES=2048 BATCH=64 LOW=1 HIGH=3
ITERS=$(((HIGH - LOW) * SAMPLES / BATCH))
DATA="data.train.dataset.num_samples=$SAMPLES"

# Total instructions of one run (callgrind's "Collected"), both threads.
count() {
  local out="$WORK/cg.out"
  LD_PRELOAD="$WORK/hwy_timer_shim.so" valgrind --tool=callgrind --callgrind-out-file="$out" \
    "$@" > "$WORK/log" 2>&1 || {
    echo "step_instructions.sh: failed under valgrind: $*" >&2
    tail -20 "$WORK/log" >&2
    exit 1
  }
  sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$WORK/log"
}
bare() {
  count "$BIN/rh_bench_step_overhead" --bare --config "$CONFIG" --set "$DATA" --epochs "$1"
}
runner() {
  rm -rf "$WORK/run"
  count "$BIN/runner-host" --config "$CONFIG" --set "work_dir=$WORK/run" --set "$DATA" \
    --set "train_cfg={by_epoch: true, max_epochs: $1, val_interval: 100000000}" --set "hooks=$2"
}
per_iter() { echo $((($2 - $1) / ITERS)); }

echo "instructions per iteration ($CONFIG, train set cut to $SAMPLES samples, 1 thread, $ITERS iterations between runs of $LOW and $HIGH epochs)"
base=$(per_iter "$(bare $LOW)" "$(bare $HIGH)")
printf '%-36s %10d\n' "bare LibTorch loop" "$base"
while IFS='|' read -r name hooks; do
  n=$(per_iter "$(runner $LOW "$hooks")" "$(runner $HIGH "$hooks")")
  printf '%-36s %10d  %+7d  ratio %s\n' "$name" "$n" $((n - base)) \
    "$(python3 -c "print(f'{$n / $base:.4f}')")"
done << 'VARIANTS'
runner-host, no hooks|[]
logger (interval 50)|[{type: logger, interval: 50}]
metrics|[{type: metrics}]
logger+metrics|[{type: logger, interval: 50}, {type: metrics}]
VARIANTS
