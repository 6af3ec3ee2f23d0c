#!/usr/bin/env bash
# The main job on its built-in default: installs dependencies if needed,
# builds, and runs configs/quickstart.yaml (extra arguments go to runner-host).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
"$ROOT/tools/build.sh"
cd "$ROOT"
exec "$BUILD/bin/runner-host" --config configs/quickstart.yaml "$@"
