#!/usr/bin/env bash
# Configures and builds runner-host into build/ (override with RH_BUILD_DIR).
# Extra arguments go to the CMake configure step. RH_BUILD_TARGET names one
# target to build (tools/quickstart.sh: rh_runtime, the host and the shipped
# plugins); unset, everything is built, tests included.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
"$ROOT/tools/install-deps.sh"
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
fi
cmake --build "$BUILD" -j "$(nproc)" ${RH_BUILD_TARGET:+--target "$RH_BUILD_TARGET"}
