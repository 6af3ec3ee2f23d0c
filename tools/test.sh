#!/usr/bin/env bash
# The test command: installs dependencies if needed, builds, runs every test.
# RH_TORCH picks the LibTorch (tools/build.sh).
# Usage: tools/test.sh [ctest arguments, e.g. -R Cli]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
"$ROOT/tools/build.sh"
cd "$BUILD"
ctest --output-on-failure -j "$(nproc)" --timeout 900 "$@"
