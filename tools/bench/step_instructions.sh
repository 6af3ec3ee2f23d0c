#!/usr/bin/env bash
# Instructions per training iteration, counted by valgrind (callgrind): the
# bare LibTorch loop of rh_bench_step_overhead against runner-host without
# hooks and with the shipped per-iteration hooks. Instruction counts do not
# depend on the machine's load, so this is the noise-free side of issue 14's
# wall-clock benchmark (rh_bench_step_overhead): what the runner's own work
# adds, though not what it costs in time (an instruction of sgemm and one of
# malloc take different times; system calls count as one instruction).
#
#   tools/bench/step_instructions.sh [--cache] [config (configs/quickstart.yaml)]  (after tools/build.sh)
#
# --cache: cachegrind instead, simulating 32 KiB L1 caches and, as the last
# level, a 512 KiB 8-way cache, the size of this machine's L2 (EPYC): per
# iteration the instructions, the L1 misses (instruction and data) and the
# L2 misses, which are what an iteration's instruction count leaves out
# (a miss costs tens of instructions' time). Slower (~15 min).
# RH_VALGRIND_KEEP=DIR keeps each run's valgrind output there (named after
# the variant and the epochs), for callgrind_annotate / cg_annotate.
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
CACHE=0
if [ "${1:-}" = --cache ]; then
  CACHE=1
  shift
fi
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

# Totals of one run, both threads: instructions (callgrind's "Collected");
# with --cache "instructions L1-misses L2-misses" (cachegrind's summary).
#   count RUN_NAME (the kept file's name) COMMAND...
count() {
  local run_name="$1" out="$WORK/cg.out"
  shift
  local tool=(--tool=callgrind --callgrind-out-file="$out")
  [ "$CACHE" = 1 ] && tool=(--tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=32768,8,64
    --LL=524288,8,64 --cachegrind-out-file="$out")
  LD_PRELOAD="$WORK/hwy_timer_shim.so" valgrind "${tool[@]}" "$@" > "$WORK/log" 2>&1 || {
    echo "step_instructions.sh: failed under valgrind: $*" >&2
    tail -20 "$WORK/log" >&2
    exit 1
  }
  if [ -n "${RH_VALGRIND_KEEP:-}" ]; then
    mkdir -p "$RH_VALGRIND_KEEP"
    cp "$out" "$RH_VALGRIND_KEEP/$run_name.out"
  fi
  if [ "$CACHE" = 0 ]; then
    sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$WORK/log"
    return
  fi
  # "==N== I1  misses:  16,675,286" and "==N== D1  misses:  92,581,657  (89,878,091 rd ...)"
  field() { sed -n "s/^==[0-9]*== $1 *\([0-9,]*\).*/\1/p" "$WORK/log" | tr -d ,; }
  echo "$(field 'I *refs:') $(($(field 'I1 *misses:') + $(field 'D1 *misses:'))) $(field 'LL misses:')"
}
bare() {
  count "bare-$1" "$BIN/rh_bench_step_overhead" --bare --config "$CONFIG" --set "$DATA" --epochs "$1"
}
# runner EPOCHS HOOKS NAME
runner() {
  rm -rf "$WORK/run"
  count "$(tr -c 'a-z0-9\n' '_' <<< "$3")-$1" "$BIN/runner-host" --config "$CONFIG" --set "work_dir=$WORK/run" --set "$DATA" \
    --set "train_cfg={by_epoch: true, max_epochs: $1, val_interval: 100000000}" --set "hooks=$2"
}
# Per iteration: each count of the HIGH-epoch run less the LOW-epoch run's, / ITERS.
per_iter() {
  local low=($1) high=($2) out=() i
  for i in "${!high[@]}"; do out+=($(((high[i] - low[i]) / ITERS))); done
  echo "${out[*]}"
}
ratio() { python3 -c "print(f'{$1 / $2:.4f}')"; }

if [ "$CACHE" = 0 ]; then
  echo "instructions per iteration ($CONFIG, train set cut to $SAMPLES samples, 1 thread, $ITERS iterations between runs of $LOW and $HIGH epochs)"
else
  echo "per iteration, cachegrind: 32 KiB L1s, 512 KiB 8-way L2 as the last level ($CONFIG, train set cut to $SAMPLES samples, 1 thread, $ITERS iterations between runs of $LOW and $HIGH epochs)"
  printf '%-36s %10s %9s %9s   ratios to the bare loop\n' "" instructions "L1 miss" "L2 miss"
fi
base=($(per_iter "$(bare $LOW)" "$(bare $HIGH)"))
if [ "$CACHE" = 0 ]; then
  printf '%-36s %10d\n' "bare LibTorch loop" "${base[0]}"
else
  printf '%-36s %10d %9d %9d\n' "bare LibTorch loop" "${base[@]}"
fi
while IFS='|' read -r name hooks; do
  n=($(per_iter "$(runner $LOW "$hooks" "$name")" "$(runner $HIGH "$hooks" "$name")"))
  if [ "$CACHE" = 0 ]; then
    printf '%-36s %10d  %+7d  ratio %s\n' "$name" "${n[0]}" $((n[0] - base[0])) \
      "$(ratio "${n[0]}" "${base[0]}")"
  else
    printf '%-36s %10d %9d %9d   %s %s %s\n' "$name" "${n[@]}" "$(ratio "${n[0]}" "${base[0]}")" \
      "$(ratio "${n[1]}" "${base[1]}")" "$(ratio "${n[2]}" "${base[2]}")"
  fi
done << 'VARIANTS'
runner-host, no hooks|[]
logger (interval 50)|[{type: logger, interval: 50}]
metrics|[{type: metrics}]
logger+metrics|[{type: logger, interval: 50}, {type: metrics}]
VARIANTS
