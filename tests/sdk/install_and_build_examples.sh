#!/usr/bin/env bash
# install_and_build_examples.sh <build_dir> <source_dir>
#
# docs/architecture.md §2 rule 9: an out-of-tree plugin builds against the *installed*
# SDK with find_package(RunnerHostSDK) and nothing else from the source tree.
#   1. cmake --install <build_dir> into a fresh prefix;
#   2. configure each example of <source_dir>/examples with only
#      -DCMAKE_PREFIX_PATH=<prefix> (a copy of the example, outside the
#      source tree), build it, and fail on any compiler warning;
#   3. run the installed `runner-host --list-plugins --plugin-path <example
#      build dir>` and check that the example's type is listed as a hook.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <build_dir> <source_dir>" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rh-sdk-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

fail() {
  echo "FAIL: $1" >&2
  if [[ -n "${2:-}" && -f "$2" ]]; then
    echo "---- output ($2) ----" >&2
    cat "$2" >&2
    echo "----" >&2
  fi
  exit 1
}

echo "== cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  fail "cmake --install failed (is the build complete?)" "$tmp/install.log"

# example folder -> the hook type it provides
declare -A examples=([hook_cpp]=iter_timer [hook_c]=hello)

for example in hook_cpp hook_c; do
  type=${examples[$example]}
  # A copy outside the source tree: nothing can be picked up by relative path.
  src="$tmp/src/$example"
  bld="$tmp/build/$example"
  mkdir -p "$src" "$bld"
  cp -R "$source_dir/examples/$example/." "$src/"

  echo "== $example: configure and build against $prefix"
  cmake -S "$src" -B "$bld" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/$example.configure.log" 2>&1 ||
    fail "$example: configure failed" "$tmp/$example.configure.log"
  cmake --build "$bld" -j1 >"$tmp/$example.build.log" 2>&1 ||
    fail "$example: build failed" "$tmp/$example.build.log"
  if grep -q "warning:" "$tmp/$example.build.log"; then
    fail "$example: the build has compiler warnings" "$tmp/$example.build.log"
  fi
  if grep -rqs "$source_dir" "$bld/CMakeCache.txt"; then
    fail "$example: its CMakeCache.txt refers to the source tree $source_dir" "$bld/CMakeCache.txt"
  fi

  host="$prefix/bin/runner-host"
  [[ -x "$host" ]] || fail "$host was not installed (does the build define and install runner-host?)"
  echo "== $example: $host --list-plugins --plugin-path $bld"
  if ! "$host" --list-plugins --plugin-path "$bld" >"$tmp/$example.list.log" 2>&1; then
    fail "$example: runner-host --list-plugins exited with an error" "$tmp/$example.list.log"
  fi
  # A line with both words standing alone (not inside a path): "  hook  <type>  ...".
  if ! grep -E "(^|[[:space:]])$type([[:space:]]|$)" "$tmp/$example.list.log" |
    grep -qE "(^|[[:space:]])hook([[:space:]]|$)"; then
    fail "$example: --list-plugins does not list type '$type' as a hook" "$tmp/$example.list.log"
  fi
  echo "ok   $example: '$type' listed as a hook"
  # Found by its file name (librh_hook_<type>.so) from the search path, with
  # no plugin: path in the job.
  printf 'model: {type: mlp, in_features: 4, num_classes: 2}\ntrain_cfg: {max_epochs: 1}\nhooks:\n  - {type: %s}\n' "$type" \
    >"$tmp/$example.job.yaml"
  if ! "$host" --config "$tmp/$example.job.yaml" --dry-run --plugin-path "$bld" \
    >"$tmp/$example.dry.log" 2>&1; then
    fail "$example: a job with only 'type: $type' and --plugin-path $bld is refused" \
      "$tmp/$example.dry.log"
  fi
  echo "ok   $example: 'type: $type' found on the search path"
done
echo "ok   every example builds against the installed SDK and is listed by the host"
