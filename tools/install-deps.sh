#!/usr/bin/env bash
# Installs the Debian 12 packages runner-host builds and runs with; does
# nothing when they are all present. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev            # LibTorch 1.13 (CPU) with c10d Gloo
  libopenblas0-pthread    # without it LibTorch runs on the reference BLAS (8x slower)
  libgloo-dev libboost-dev libboost-program-options-dev
  libyaml-cpp-dev libspdlog-dev libdlpack-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  binutils                # nm, for the exported-symbol test
  protobuf-compiler libprotobuf-dev  # the tensorboard hook's event files
  python3-protobuf python3-matplotlib  # tools/plot_metrics.py and the event-file reader test
  clang libfuzzer-14-dev  # tools/fuzz.sh: the libFuzzer targets
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
