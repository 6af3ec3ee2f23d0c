#!/usr/bin/env bash
# check_exports.sh <lib.so>... — every runner-host plugin must export exactly
# one dynamic symbol, `rh_plugin_info` (docs/architecture.md §2 rule 7: hidden
# visibility + the linker version script sdk/cmake/rh_plugin.map). Prints the
# offending symbols of each library that exports anything else, exits 1.
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: $0 <plugin.so>..." >&2
  exit 2
fi

status=0
for lib in "$@"; do
  if [[ ! -f "$lib" ]]; then
    echo "FAIL $lib: no such file" >&2
    status=1
    continue
  fi
  # `nm -D --defined-only` prints "<address> <type> <name>[@<version>]".
  if ! symbols=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' | sort -u); then
    echo "FAIL $lib: nm could not read it" >&2
    status=1
    continue
  fi
  if [[ "$symbols" == "rh_plugin_info" ]]; then
    echo "ok   $lib"
    continue
  fi
  status=1
  if ! grep -qx rh_plugin_info <<<"$symbols"; then
    echo "FAIL $lib: does not export rh_plugin_info" >&2
  fi
  extra=$(grep -vx rh_plugin_info <<<"$symbols" || true)
  if [[ -n "$extra" ]]; then
    echo "FAIL $lib: exports symbols other than rh_plugin_info (build it with rh_add_plugin," \
      "which applies hidden visibility and the version script):" >&2
    sed 's/^/       /' <<<"$extra" >&2
  fi
done
exit $status
