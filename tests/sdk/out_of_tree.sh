# out_of_tree.sh — sourced by the out-of-tree strategy tests:
#   source out_of_tree.sh <build_dir> <source_dir> <example> <plugin file>
# installs the build into a temporary prefix, builds examples/<example>
# against that installed SDK alone (no warnings allowed), and leaves: $tmp
# (removed at exit), $host (the installed runner-host), $plugin (the built
# plugin), fail MESSAGE [LOG] and port (a free TCP port).
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
example=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rh-$example.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $1" >&2; [[ -f "${2:-}" ]] && cat "$2" >&2; exit 1; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

cmake --install "$build_dir" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || fail "install" "$tmp/install.log"
cp -R "$source_dir/examples/$example" "$tmp/src"
# Through ccache when there is one (tools/install-deps.sh installs it),
# with paths relative to this run's folder, so that the next run (another
# folder) compiles the unchanged example from the cache: the LibTorch
# example took 30 s of the test's 40. What is tested is unchanged: the
# example configures and builds against the installed SDK alone.
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$tmp" CCACHE_NOHASHDIR=1
fi
cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" "${launcher[@]}" \
  >"$tmp/configure.log" 2>&1 || fail "configure against the installed SDK" "$tmp/configure.log"
cmake --build "$tmp/build" >"$tmp/build.log" 2>&1 || fail "build" "$tmp/build.log"
grep -q "warning:" "$tmp/build.log" && fail "the example has compiler warnings" "$tmp/build.log"
plugin="$tmp/build/$4"
[[ -f "$plugin" ]] || fail "no $plugin"
host="$tmp/prefix/bin/runner-host"
