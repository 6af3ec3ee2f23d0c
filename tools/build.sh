#!/usr/bin/env bash
# Configures and builds runner-host into build/ (override with RH_BUILD_DIR).
# Extra arguments go to the CMake configure step. RH_BUILD_TARGET names one
# target to build (tools/quickstart.sh: rh_quickstart, the host and the
# plugins configs/quickstart.yaml loads; rh_runtime: every shipped plugin);
# unset, everything is built, tests included.
# RH_TORCH=system|python|auto (default auto) picks the LibTorch: Debian's
# 1.13, or on a GPU machine the one in python3's torch with the nvidia-nccl
# wheel's NCCL (tools/rh_torch.sh says when auto picks which). The pick is
# applied when the build directory is first configured; a build directory
# configured against the other one is refused.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
# shellcheck source=tools/rh_torch.sh
source "$ROOT/tools/rh_torch.sh"
rc=0
rh_torch_pick || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "build: $RH_TORCH_REASON" >&2
  exit 2
fi
export RH_TORCH="$RH_TORCH_PICKED"  # install-deps: picked once
configure=()
if [ "$RH_TORCH_PICKED" = python ]; then
  echo "build: LibTorch $RH_TORCH_VERSION from $RH_TORCH_CMAKE_DIR ($RH_TORCH_REASON)"
  configure+=(-DTorch_DIR="$RH_TORCH_CMAKE_DIR")
  if [ -n "$RH_NCCL_LIBRARY" ]; then
    echo "build: NCCL from the nvidia-nccl wheel ($RH_NCCL_LIBRARY)"
    configure+=(-DRH_WITH_NCCL=ON -DRH_NCCL_INCLUDE_DIR="$RH_NCCL_INCLUDE_DIR"
                -DRH_NCCL_LIBRARY="$RH_NCCL_LIBRARY")
  else
    echo "build: no nvidia-nccl wheel in python3: NCCL from the CUDA toolkit if CMake finds it"
  fi
else
  # 1.13 on Debian 12, 2.6 on Debian 13 (tools/test.sh --torch2's chroot).
  version=$(dpkg-query -W -f '${Version}' libtorch-dev 2> /dev/null || true)
  echo "build: Debian's LibTorch ${version:-(libtorch-dev, installed next)}, CPU ($RH_TORCH_REASON)"
fi
# The main job's packages for one target (the quickstart); the tests' too
# for everything. A build directory first configured for the quickstart has
# no tests (GoogleTest may not be installed yet): building everything turns
# them on.
if [ -n "${RH_BUILD_TARGET:-}" ]; then
  "$ROOT/tools/install-deps.sh"
  tests=OFF
else
  "$ROOT/tools/install-deps.sh" --tests
  tests=ON
fi
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRH_BUILD_TESTS="$tests" "${configure[@]}" "$@"
else
  if [ "$tests" = ON ] && grep -q '^RH_BUILD_TESTS:BOOL=OFF$' "$BUILD/CMakeCache.txt"; then
    cmake "$BUILD" -DRH_BUILD_TESTS=ON > /dev/null
  fi
  # Configured before: the LibTorch it uses stays. Refuse when it is the
  # other one of the two RH_TORCH chooses between.
  configured=$(sed -n 's/^Torch_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  configured=$(realpath -m "${configured:-none}")
  debian=$(realpath -m /usr/lib/x86_64-linux-gnu/cmake/Torch)
  want=$debian
  [ "$RH_TORCH_PICKED" = python ] && want=$(realpath -m "$RH_TORCH_CMAKE_DIR")
  if [ "$configured" != "$want" ]; then
    if [ "$configured" = "$debian" ] || [[ "$configured" == */torch/share/cmake/Torch ]]; then
      echo "build: $BUILD was configured against the LibTorch in $configured, but this run" \
        "picks the one in $want ($RH_TORCH_REASON). Build elsewhere (RH_BUILD_DIR=...)," \
        "remove $BUILD, or set RH_TORCH to the one it was configured with." >&2
      exit 2
    fi
    echo "build: $BUILD keeps the LibTorch it was configured with ($configured)"
  fi
fi
cmake --build "$BUILD" -j "$(nproc)" ${RH_BUILD_TARGET:+--target "$RH_BUILD_TARGET"}
