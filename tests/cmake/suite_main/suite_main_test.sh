#!/usr/bin/env bash
# suite_main_test.sh <rh_suite_main_fixture>: the exit codes ctest reads from
# a suite run with --rh_ctest_suite (tests/common/SuiteMain.cpp).
bin=$1
failures=0
expect() {  # expect <exit code> <filter> <what> [text the output must hold]
  local out rc=0
  out=$("$bin" --gtest_filter="$2" --rh_ctest_suite 2>&1) || rc=$?
  if [[ $rc != "$1" ]]; then
    echo "FAIL $3: exit $rc, expected $1"; echo "$out"; failures=$((failures + 1))
  elif [[ -n "${4:-}" && "$out" != *"$4"* ]]; then
    echo "FAIL $3: the output lacks '$4'"; echo "$out"; failures=$((failures + 1))
  else
    echo "ok   $3: exit $rc"
  fi
}
expect 0 'Passes.*' "every test passed"
expect 77 'Skips.*' "every test skipped"
expect 1 'Mixed.*' "a skip among passes is refused" \
  "skipped Mixed.Skips and passed the others: ctest would report the suite passed"
expect 1 'Fails.*' "a failure"
expect 1 'Fails.*:Skips.*' "a failure beside a skip"
expect 1 'Absent.*' "no test matched" "no test matched the filter"
# Without the flag it is googletest's main: a skip among passes exits 0.
rc=0; "$bin" --gtest_filter='Mixed.*' >/dev/null 2>&1 || rc=$?
if [[ $rc == 0 ]]; then echo "ok   without --rh_ctest_suite: googletest's exit code"; else
  echo "FAIL without --rh_ctest_suite: exit $rc"; failures=$((failures + 1)); fi
exit $((failures > 0))
