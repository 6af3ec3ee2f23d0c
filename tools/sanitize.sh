#!/usr/bin/env bash
# The non-LibTorch tests under AddressSanitizer + UndefinedBehaviorSanitizer:
# configures build-asan/ with RH_SANITIZE=address,undefined (our code, the
# SDK helpers, the plugins and the tests instrumented; LibTorch and the
# system libraries not), builds the test binaries below and runs them. A
# finding fails the run (-fno-sanitize-recover=all; ASan aborts).
#
#   tools/sanitize.sh [test-binary ...]      (after tools/install-deps.sh)
#
# Default: rh_config_tests rh_zero_tests rh_launch_tests rh_plugin_host_tests
# (about 10 minutes from scratch on 2 cores). RH_SANITIZE (any -fsanitize=
# list, e.g. thread) and RH_SANITIZE_BUILD_DIR choose another tree; only
# address,undefined has been run so far.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SAN="${RH_SANITIZE:-address,undefined}"
BUILD="${RH_SANITIZE_BUILD_DIR:-$ROOT/build-asan}"
TESTS=("$@")
if [ ${#TESTS[@]} -eq 0 ]; then
  TESTS=(rh_config_tests rh_zero_tests rh_launch_tests rh_plugin_host_tests)
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRH_SANITIZE="$SAN"
fi
cmake --build "$BUILD" -j "$(nproc --all)" --target "${TESTS[@]}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=()
for t in "${TESTS[@]}"; do
  echo "sanitize: $t ($SAN)"
  "$BUILD/bin/$t" --gtest_brief=1 || failed+=("$t")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "sanitize: failed: ${failed[*]}" >&2
  exit 1
fi
echo "sanitize: ${#TESTS[@]} test binaries clean under $SAN"
