#!/usr/bin/env bash
# The main job on its built-in default: installs dependencies if needed,
# builds the host and the plugins configs/quickstart.yaml loads (target
# rh_quickstart: not the other shipped plugins, rh_runtime, nor the tests,
# which tools/build.sh and tools/test.sh build), and runs the job (extra
# arguments go to runner-host). RH_TORCH picks the LibTorch (tools/build.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
RH_BUILD_TARGET=rh_quickstart "$ROOT/tools/build.sh"
cd "$ROOT"
exec "$BUILD/bin/runner-host" --config configs/quickstart.yaml "$@"
