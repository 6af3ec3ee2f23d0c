#!/usr/bin/env bash
# quickstart_target_test.sh RUNNER_HOST LIBRH_RUNNER SOURCE_DIR WORK PLUGIN...
# Lays out an install prefix holding the program, librh_runner.so and only
# the given plugins (rh_quickstart's), then:
#   1. configs/quickstart.yaml trains there for one epoch (every plugin it
#      loads is in the prefix: the search path has nothing else);
#   2. the same job with strategy ddp fails, its message naming
#      librh_strategy_ddp.so as shipped but not built, and tools/build.sh.
set -euo pipefail
runner_host="$1" runner_lib="$2" src="$3" work="$4"
shift 4
fail() { echo "FAIL: $1"; [ -n "${2:-}" ] && tail -20 "$2"; exit 1; }
prefix="$work/quickstart_prefix"
rm -rf "$prefix" "$work/qs_run"
mkdir -p "$prefix/bin" "$prefix/lib/runner-host/plugins" "$work/qs_run"
cp "$runner_host" "$prefix/bin/"
cp "$runner_lib" "$prefix/lib/runner-host/"
for p in "$@"; do cp "$p" "$prefix/lib/runner-host/plugins/"; done
# The same relative layout as the build tree's (and the install's).
[ "$(basename "$(dirname "$runner_lib")")" = runner-host ] || fail "unexpected layout: $runner_lib"
sed -e "s|^work_dir:.*|work_dir: $work/qs_run/work|" \
    -e "s|^train_cfg:.*|train_cfg: {by_epoch: true, max_epochs: 1, val_interval: 1}|" \
    "$src/configs/quickstart.yaml" > "$work/qs_run/quickstart.yaml"
grep -q "max_epochs: 1," "$work/qs_run/quickstart.yaml" || fail "could not shorten the job"
log="$work/qs_run/quickstart.log"
env -u RH_PLUGIN_PATH "$prefix/bin/runner-host" --config "$work/qs_run/quickstart.yaml" \
  > "$log" 2>&1 || fail "configs/quickstart.yaml does not run with rh_quickstart's plugins" "$log"
grep -q "Epoch(val)" "$log" || fail "no validation line" "$log"
sed -e "s|^strategy:.*|strategy: {type: ddp}|" "$work/qs_run/quickstart.yaml" > "$work/qs_run/ddp.yaml"
log="$work/qs_run/ddp.log"
if env -u RH_PLUGIN_PATH "$prefix/bin/runner-host" --config "$work/qs_run/ddp.yaml" --dry-run \
  > "$log" 2>&1; then
  fail "a ddp job passed without librh_strategy_ddp.so" "$log"
fi
grep -q "librh_strategy_ddp.so is a plugin runner-host ships but was not built here" "$log" ||
  fail "the message does not say the plugin is shipped but not built" "$log"
grep -q "tools/build.sh builds them all" "$log" || fail "the message does not say how to build it" "$log"
echo "ok: $# plugins ($(cd "$prefix/lib/runner-host/plugins" && echo *)) run the quickstart"
