#!/usr/bin/env bash
# Installs the Debian packages runner-host builds and runs with (Debian 12,
# or Debian 13 under its names); does nothing when they are all present.
# Needs root (or sudo).
#
#   tools/install-deps.sh                 what the main job needs (tools/quickstart.sh):
#                                         the compiler, the libraries, LibTorch
#   tools/install-deps.sh --tests         that and what the tests need (tools/test.sh):
#                                         GoogleTest, python3-torch, clang, ...
#   tools/install-deps.sh --list [--tests]   prints the packages, one a line
#   tools/install-deps.sh --missing-is-failure PACKAGE
#       for a test that needs PACKAGE and finds it unusable: exits 0 (the
#       test fails) when PACKAGE is on the --tests list and the run is CI (CI
#       set, not to false or 0; .ci/run sets it) or dpkg says it is installed
#       (then it is broken); exits 1 (the test
#       skips) otherwise: a developer machine where it is not installed yet.
#       Prints the reason either way.
#
# The first run installs only what the main job needs: the test-only
# packages (python3-torch, clang and libFuzzer, matplotlib with Qt) come
# with the first tools/test.sh.
#
# RH_TORCH (system | python | auto, tools/rh_torch.sh) picks the LibTorch
# the build uses; when it is the python one (a GPU machine's pip LibTorch),
# Debian's libtorch-dev is left out: its headers in /usr/include would stand
# in unseen for any header the other LibTorch lacks.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The release's own names where they differ (libFuzzer follows clang's
# default version: 14 in Debian 12, 19 in Debian 13).
# shellcheck source=/dev/null
codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2> /dev/null || true)
case "$codename" in
  trixie | forky | sid) libfuzzer=libfuzzer-19-dev ;;
  *) libfuzzer=libfuzzer-14-dev ;;
esac

# What the main job needs: build the host and the shipped plugins, run them.
PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libopenblas0-pthread    # without it LibTorch runs on the reference BLAS (8x slower)
  libgloo-dev libboost-dev libboost-program-options-dev
  libyaml-cpp-dev libspdlog-dev libdlpack-dev
  protobuf-compiler libprotobuf-dev  # the tensorboard hook's event files
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev  # image datasets: JPEG (whole and a region), PNG
)
# What the tests add (tools/test.sh).
TEST_PACKAGES=(
  libgtest-dev libgmock-dev
  binutils                # nm, for the exported-symbol test
  python3-protobuf python3-matplotlib  # tools/plot_metrics.py and the event-file reader test
  python3-numpy           # TokenShardDatasetTest writes nanoGPT's and Megatron's token files with it
  python3-pil             # the image tests' references (Pillow's decode, resize, ImageOps) and folders
  python3-torchvision     # tools/bench/bench_data.sh's peer (DataLoader + torchvision), its smoke test
  # /usr/bin/python3's torch (Debian 12: 1.13, Debian 13: 2.6, CPU): the
  # interop tests read our files with it (SafetensorsTest.PythonReadsTheFile,
  # CkptToolTest.ConvertToTorch... and CkptToolTest.TorchCheckpointIo...:
  # torch.load; StepOverheadBench: the archives) and tools/bench/'s PyTorch
  # peers. A test finding it missing fails under CI (--missing-is-failure).
  python3-torch
  clang "$libfuzzer"      # tools/fuzz.sh: the libFuzzer targets
  iproute2 util-linux     # ip netns, unshare: the simulated hosts of tests/multinode
)
# The LibTorch of RH_TORCH=system (the default, what CI builds with).
TORCH_PACKAGES=(
  libtorch-dev            # LibTorch 1.13 (CPU) with c10d Gloo
)

# The whole list for this machine (the torch packages when RH_TORCH picks
# Debian's); $1 = tests: the test packages too.
all_packages() {
  printf '%s\n' "${PACKAGES[@]}"
  if [ "${1:-}" = tests ]; then printf '%s\n' "${TEST_PACKAGES[@]}"; fi
  local pick="${RH_TORCH:-auto}"
  if [ "$pick" != system ] && [ "$pick" != python ]; then
    # shellcheck source=tools/rh_torch.sh
    source "$ROOT/tools/rh_torch.sh"
    rh_torch_pick > /dev/null 2>&1 || RH_TORCH_PICKED=system
    pick="$RH_TORCH_PICKED"
  fi
  if [ "$pick" = system ]; then printf '%s\n' "${TORCH_PACKAGES[@]}"; fi
}

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# on_list PACKAGE LIST: whether PACKAGE is a line of LIST.
on_list() {
  local p
  while read -r p; do [ "$p" = "$1" ] && return 0; done <<< "$2"
  return 1
}

which=runtime
case "${1:-}" in
  --list)
    [ "${2:-}" = --tests ] && which=tests
    all_packages "$which"
    exit 0
    ;;
  --tests)
    which=tests
    ;;
  --missing-is-failure)
    pkg="${2:?--missing-is-failure needs a package name}"
    # Torch packages are the only ones that depend on RH_TORCH: others are
    # looked up without running python3 (rh_torch.sh imports torch).
    if on_list "$pkg" "$(printf '%s\n' "${PACKAGES[@]}" "${TEST_PACKAGES[@]}")" ||
      on_list "$pkg" "$(all_packages tests)"; then
      if [ -n "${CI:-}" ] && [ "${CI,,}" != false ] && [ "$CI" != 0 ]; then
        echo "$pkg is in tools/install-deps.sh, which CI runs: it must be installed and work"
        exit 0
      elif installed "$pkg"; then
        echo "$pkg is installed (dpkg) but does not work here"
        exit 0
      fi
      echo "$pkg is not installed on this machine (tools/install-deps.sh installs it; under CI this is a failure)"
      exit 1
    fi
    echo "tools/install-deps.sh does not install $pkg on this machine"
    exit 1
    ;;
  "") ;;
  *)
    echo "install-deps: unknown argument '$1' (--tests, --list [--tests], --missing-is-failure PACKAGE)" >&2
    exit 2
    ;;
esac

missing=()
while read -r p; do
  installed "$p" || missing+=("$p")
done < <(all_packages "$which")
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
