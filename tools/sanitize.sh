#!/usr/bin/env bash
# The tests that need no LibTorch of their own under sanitizers:
# configures a build directory with RH_SANITIZE (our code, the SDK helpers,
# the plugins and the tests instrumented; LibTorch, Gloo and the system
# libraries not), builds the given test binaries and runs them. A finding
# fails the run (-fno-sanitize-recover=all; ASan and TSan abort or exit
# non-zero).
#
#   tools/sanitize.sh [test-binary ...]                     ASan + UBSan, build-asan/
#   RH_SANITIZE=thread tools/sanitize.sh [test-binary ...]  TSan, build-tsan/
#
# Default binaries: with address,undefined every test binary that links no
# LibTorch (config, launcher, plugin host and host API, ABI test plugins,
# checkpoint store and index, safetensors and the hooks, zero's config and
# loss scaler, the communicator); with thread the communicator's
# (rh_comm_tests: the shared-memory collectives, gloo, the async work
# queue). CI runs both (.ci/run). RH_SANITIZE_BUILD_DIR chooses another
# tree. Suppressions: tools/sanitizers/tsan.supp (each explained); none for
# ASan/UBSan.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SAN="${RH_SANITIZE:-address,undefined}"
case "$SAN" in
  thread) DEFAULT_DIR="$ROOT/build-tsan"; DEFAULT_TESTS=(rh_comm_tests) ;;
  *) DEFAULT_DIR="$ROOT/build-asan"
     DEFAULT_TESTS=(rh_config_tests rh_launch_tests rh_plugin_host_tests rh_plugins_io_tests
                    rh_checkpoint_tests AbiPluginTest rh_zero_tests rh_comm_tests) ;;
esac
BUILD="${RH_SANITIZE_BUILD_DIR:-$DEFAULT_DIR}"
TESTS=("$@")
if [ ${#TESTS[@]} -eq 0 ]; then
  TESTS=("${DEFAULT_TESTS[@]}")
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRH_SANITIZE="$SAN" >/dev/null
cmake --build "$BUILD" -j "$(nproc --all)" --target "${TESTS[@]}"
# intercept_tls_get_addr=0: GCC 12's sanitizer runtime takes a dynamic TLS
# block for one with glibc 2.19's header whenever the block happens to start
# at that offset in its page, reads a bogus range from it, and LeakSanitizer's
# tracer then dies at exit with "Tracer caught signal 11" after every test
# passed (rh_plugin_host_tests, which dlopens the test plugins: 9 of 20 runs
# here; none of 20 with the option). Known upstream (google/sanitizers
# #1322, fixed after GCC 13 / LLVM 16). Leaks are still found; only
# pointers held solely in a plugin's thread_local would read as leaks.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:intercept_tls_get_addr=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$ROOT/tools/sanitizers/tsan.supp}"
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
