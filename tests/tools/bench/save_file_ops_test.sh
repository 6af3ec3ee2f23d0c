#!/usr/bin/env bash
# rh_bench_save_file_ops: replays a save in each variant, prints a row for
# each, leaves nothing behind, and refuses bad arguments with a message
# naming them. (What it measures is not asserted: machines are noisy.)
#   save_file_ops_test.sh BENCH_BINARY SCRATCH_DIR
set -u
BENCH="$1"
DIR="$2/save_file_ops_test"
rm -rf "$DIR" && mkdir -p "$DIR"
fail() { echo "FAIL: $*" >&2; exit 1; }

out=$("$BENCH" --saves 4 --dir "$DIR" 2>&1) || fail "exit $?: $out"
echo "$out"
for row in "as runner-host saves (8 fsync)" "without sync_file_range" "no fsync, no sync_file_range"; do
  grep -qF "$row " <<< "$out" || fail "no row '$row'"
done
grep -qE "^$DIR: 4 saves per variant of 4 files \(278717 bytes\)" <<< "$out" || fail "no header"
[ -z "$(ls -A "$DIR")" ] || fail "left behind: $(ls -A "$DIR")"

expect_error() {  # expect_error MESSAGE ARGS...
  local message="$1"
  shift
  out=$("$BENCH" "$@" 2>&1)
  rc=$?
  [ "$rc" -eq 1 ] || fail "'$*' exited $rc: $out"
  grep -qF -- "$message" <<< "$out" || fail "'$*' said: $out"
}
expect_error "--sizes: expected byte counts 1..4 GiB separated by commas, got '12,x'" --sizes 12,x
expect_error "--sizes: expected byte counts" --sizes ""
expect_error "--saves: expected a whole number >= 4, got '2'" --saves 2
expect_error "--cpu: expected a whole number >= 0, got 'one'" --cpu one
expect_error "--cpu 4096: Invalid argument" --cpu 4096 --saves 4
expect_error "unknown argument '--dri'" --dri /tmp
expect_error "'--dir' needs a value" --dir
expect_error "--dir $DIR/missing: not a directory" --dir "$DIR/missing"
touch "$DIR/file"
expect_error "--dir $DIR/file: not a directory" --dir "$DIR/file"
rm "$DIR/file"
echo PASS
