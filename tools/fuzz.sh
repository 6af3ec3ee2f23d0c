#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/libfuzzer/) with clang,
# -fsanitize=fuzzer,address,undefined, in their own build directory, and
# runs each for a bounded time. A crash, leak, sanitizer report or timeout
# fails the script; the input that caused it is left in
# $BUILD/artifacts/<target>/ — fix the bug, then keep the input in
# tests/fuzz/regressions/<target>/ (the ordinary test suite replays it).
# Usage: tools/fuzz.sh [seconds per target (60)] [target ...]
# Env: RH_FUZZ_BUILD_DIR (build-fuzz); RH_FUZZ_SEED (1: libFuzzer's random
# choices are the same on every run; its path still follows coverage, which
# differs between machines, so CI may find what a local run did not; 0 lets
# libFuzzer pick a seed). Needs clang and libfuzzer-14-dev
# (tools/install-deps.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(job_config safetensors_header checkpoint_meta plugin_info
           csv_dataset mnist_dataset cifar10_dataset)
fi

if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT/tests/fuzz/libfuzzer" -B "$BUILD" -G Ninja \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD" -j "$(nproc)" --target "${TARGETS[@]/#/fuzz_}"

LIMIT="${SECONDS_PER_TARGET}s"
if [ -n "${RH_FUZZ_RUNS:-}" ]; then LIMIT="$RH_FUZZ_RUNS inputs"; fi
failed=()
for t in "${TARGETS[@]}"; do
  # New inputs go to the build directory's corpus; the seeds in the tree
  # are read, never written.
  mkdir -p "$BUILD/corpus/$t" "$BUILD/artifacts/$t"
  # The kept crash inputs run first, under the sanitizers the ordinary
  # suite lacks (an undefined-behaviour finding replays only here).
  regressions=""
  if [ -d "$ROOT/tests/fuzz/regressions/$t" ]; then regressions="$ROOT/tests/fuzz/regressions/$t"; fi
  echo "fuzz: $t for $LIMIT"
  # RH_FUZZ_RUNS bounds a target by its number of inputs instead of time, so
  # a slow machine tries as many inputs as a fast one.
  bound=(-max_total_time="$SECONDS_PER_TARGET")
  if [ -n "${RH_FUZZ_RUNS:-}" ]; then bound=(-runs="$RH_FUZZ_RUNS"); fi
  if ! "$BUILD/fuzz_$t" -seed="${RH_FUZZ_SEED:-1}" "${bound[@]}" \
      -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$BUILD/artifacts/$t/" \
      "$BUILD/corpus/$t" "$ROOT/tests/fuzz/corpus/$t" $regressions > "$BUILD/$t.log" 2>&1; then
    tail -n 60 "$BUILD/$t.log" >&2
    failed+=("$t")
  fi
  grep -E "^stat::(number_of_executed_units|average_exec_per_sec)" "$BUILD/$t.log" | sed "s/^/fuzz: $t /"
done
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in $BUILD/artifacts/)" >&2
  exit 1
fi
echo "fuzz: ${#TARGETS[@]} targets, $LIMIT each, no findings"
