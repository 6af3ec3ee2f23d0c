#!/usr/bin/env bash
# The test command: installs dependencies if needed, builds, runs every test.
# RH_TORCH picks the LibTorch (tools/build.sh).
# Usage: tools/test.sh [--torch2] [ctest arguments, e.g. -R Cli]
#   --torch2   the same in a Debian 13 chroot (LibTorch 2.6, python3-torch
#              2.6; tools/torch2_chroot.sh makes it once, ~6 min), built in
#              build-torch26/ (RH_TORCH2_BUILD_DIR); needs root.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ "${1:-}" = --torch2 ]; then
  shift
  export RH_BUILD_DIR="${RH_TORCH2_BUILD_DIR:-$ROOT/build-torch26}"
  exec "$ROOT/tools/torch2_chroot.sh" tools/test.sh "$@"
fi
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
"$ROOT/tools/build.sh"
cd "$BUILD"
# A fresh build has no test times yet, so ctest would start the tests in
# the order they are declared and leave the longest multi-rank ones to run
# alone at the end: seed its cost data from tests/ctest_cost_data.txt (a
# copy of build/Testing/Temporary/CTestCostData.txt, names and mean seconds;
# names it lacks cost nothing), longest first. Later runs refine their own.
if [ ! -f Testing/Temporary/CTestCostData.txt ]; then
  mkdir -p Testing/Temporary
  cp "$ROOT/tests/ctest_cost_data.txt" Testing/Temporary/CTestCostData.txt
fi
# Twice the machine's processors: a multi-rank test counts as 2 of them
# (PROCESSORS 2, tests/CMakeLists.txt) and keeps about one core busy, its
# ranks waiting on each other, so two run at once, or one beside two
# single-process tests (docs/build.md, "The test run"). nproc without the
# OpenMP variables, which it would honour.
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
ctest --output-on-failure -j "$((2 * cores))" --timeout 900 "$@"
