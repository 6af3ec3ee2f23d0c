#!/usr/bin/env bash
# The main job on its built-in default: installs dependencies if needed,
# builds the host and the shipped plugins (target rh_runtime: not the tests,
# which tools/test.sh builds), and runs configs/quickstart.yaml (extra
# arguments go to runner-host). RH_TORCH picks the LibTorch (tools/build.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
RH_BUILD_TARGET=rh_runtime "$ROOT/tools/build.sh"
cd "$ROOT"
exec "$BUILD/bin/runner-host" --config configs/quickstart.yaml "$@"
