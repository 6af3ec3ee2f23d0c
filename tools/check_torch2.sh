#!/usr/bin/env bash
# Compiles every LibTorch-using source of the project with -fsyntax-only
# against LibTorch 2.6's headers, the CUDA paths on (RH_WITH_C10_CUDA,
# RH_TORCH_DEVICE "cuda", RH_HAVE_NCCL), so that the code keeps compiling
# with the LibTorch 2.x a GPU machine has while CI builds and tests with
# Debian 12's LibTorch 1.13 (CPU). Nothing is linked or run.
#
# The headers are Debian 13 (trixie)'s libtorch-cuda-dev (contrib; its
# headers are a superset of libtorch-dev's), downloaded with apt-get through
# a private sources list into $RH_TORCH2_DIR (.deps/torch2, ignored) and
# unpacked there, never installed; a later run reuses them. Its own
# TorchConfig.cmake needs the absent .so files: tools/torch2/TorchConfig.cmake
# stands in for it. The CUDA toolkit's headers and NCCL (nccl.h) come from
# the machine (/usr/local/cuda).
#
# Fails (the compiler's messages shown) when a source does not compile, when
# the CUDA paths are not on, or when a LibTorch header missing from 2.6 was
# found in /usr/include instead (Debian 12's 1.13 headers are there: the
# 2.6 folders come first, so such a header would otherwise pass unseen).
#
# Usage: tools/check_torch2.sh [--cuda-only]
#   --cuda-only   only the sources with CUDA paths (an #if on RH_WITH_C10_CUDA
#                 or RH_HAVE_NCCL): what CI runs, since everything a CPU build
#                 compiles is built and tested on LibTorch 2.6 by
#                 tools/test.sh --torch2
# Env: RH_TORCH2_DIR (.deps/torch2), RH_TORCH2_BUILD_DIR (build-torch2),
#      RH_TORCH2_JOBS (nproc), RH_TORCH2_SUITE (trixie), RH_TORCH2_ONLY (a
#      regular expression: only the sources it matches, or the unity files
#      that include one, e.g. RH_TORCH2_ONLY=IterationMetrics).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEPS="${RH_TORCH2_DIR:-$ROOT/.deps/torch2}"
BUILD="${RH_TORCH2_BUILD_DIR:-$ROOT/build-torch2}"
JOBS="${RH_TORCH2_JOBS:-$(nproc)}"
SUITE="${RH_TORCH2_SUITE:-trixie}"
PREFIX="$DEPS/x/usr"
start=$SECONDS
case "${1:-}" in
  --cuda-only) export RH_TORCH2_CUDA_ONLY=1 ;;
  "") ;;
  *)
    echo "check_torch2: unknown argument '$1' (--cuda-only)" >&2
    exit 2
    ;;
esac

# 1. The headers: downloaded once (2.4 MB .deb, 0.3 MB of package lists).
if [ ! -f "$PREFIX/include/torch/csrc/api/include/torch/version.h" ]; then
  echo "check_torch2: downloading libtorch-cuda-dev ($SUITE contrib) into $DEPS"
  rm -rf "$DEPS"
  mkdir -p "$DEPS"/{lists/partial,cache/archives/partial,etc,debs}
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $SUITE contrib" \
    > "$DEPS/etc/sources.list"
  # Only this folder: the machine's sources, pins and package state are not read.
  APT=(-o "Dir::Etc::SourceList=$DEPS/etc/sources.list" -o Dir::Etc::SourceParts=/dev/null
       -o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null
       -o "Dir::State::Lists=$DEPS/lists" -o "Dir::Cache=$DEPS/cache"
       -o Dir::State::Status=/dev/null -o APT::Architecture=amd64
       -o "APT::Sandbox::User=$(id -un)")
  apt-get "${APT[@]}" -qq update
  (cd "$DEPS/debs" && apt-get "${APT[@]}" -qq download libtorch-cuda-dev)
  dpkg-deb -x "$DEPS"/debs/libtorch-cuda-dev_*.deb "$DEPS/x"
fi
version=$(sed -n 's/^#define TORCH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
  "$PREFIX/include/torch/csrc/api/include/torch/version.h" | paste -sd.)
echo "check_torch2: LibTorch $version headers from $(basename "$DEPS"/debs/*.deb)"

# 2. A build tree configured against them (configure only; ~2 s).
mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTorch_DIR="$ROOT/tools/torch2" -DRH_TORCH2_PREFIX="$PREFIX" \
  -DRH_USE_PCH=OFF -DRH_UNITY_BUILD=ON -DRH_USE_CCACHE=OFF -DRH_WITH_NCCL=ON \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$BUILD/check_torch2.configure.log" 2>&1 ||
  { cat "$BUILD/check_torch2.configure.log"; echo "check_torch2: configure failed" >&2; exit 1; }
grep -q "LibTorch $version (cuda)" "$BUILD/check_torch2.configure.log" ||
  { cat "$BUILD/check_torch2.configure.log"; echo "check_torch2: the build is not on LibTorch $version with CUDA" >&2; exit 1; }

# 3. Generated headers (the tensorboard hook's protoc output), through ninja.
mapfile -t generated < <(ninja -C "$BUILD" -t targets all |
  awk -F': ' '$2 == "CUSTOM_COMMAND" && $1 ~ /\.(h|hpp|inc)$/ {print $1}')
if [ ${#generated[@]} -gt 0 ]; then
  ninja -C "$BUILD" "${generated[@]}" > /dev/null
fi

# 4. Every compile command that sees the 2.6 headers, and every other
# source of the tree that includes LibTorch (examples, generators: with the
# flags of a shipped LibTorch plugin), with -fsyntax-only, in parallel.
python3 - "$ROOT" "$BUILD" "$PREFIX/include" "$JOBS" <<'PY'
import concurrent.futures, json, os, re, shlex, subprocess, sys, time

root, build, inc, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
entries = json.load(open(os.path.join(build, "compile_commands.json")))
torch = [e for e in entries if "-isystem " + inc + " " in e["command"] + " "]

def fail(msg):
    print("check_torch2: " + msg, file=sys.stderr)
    sys.exit(1)

# The CUDA paths must be on, or the check proves less than it says.
joined = "\n".join(e["command"] for e in torch)
for needed in ('-DRH_TORCH_DEVICE=\\"cuda\\"', "-DRH_WITH_C10_CUDA=1", "-DRH_HAVE_NCCL=1"):
    if needed not in joined:
        fail("no compile command has " + needed + ": the CUDA paths are off")

# Sources the build covers (unity files name theirs with #include).
covered = set()
for e in entries:
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    covered.add(f)
    if "/Unity/unity_" in f:
        for line in open(f):
            m = re.match(r'#include "(.*)"', line)
            if m:
                covered.add(os.path.realpath(m.group(1)))
include_re = re.compile(r'^\s*#\s*include\s*[<"](torch/|ATen/|c10/|caffe2/|rh/cpp/torch)', re.M)
extra = []
for d, dirs, files in os.walk(root):
    rel = os.path.relpath(d, root)
    dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or x.startswith(".")))]
    for name in files:
        if name.endswith((".cpp", ".cc", ".cxx")):
            path = os.path.realpath(os.path.join(d, name))
            if path not in covered and include_re.search(open(path, errors="replace").read()):
                extra.append(path)
# A plugin's compile command (the single strategy's: its unity file, or the
# file itself without the unity build).
template = next(e for e in torch if "/rh_strategy_single.dir/" in e["command"])
for path in sorted(extra):
    args = shlex.split(template["command"])
    args[args.index("-c") + 1] = path
    args[args.index("-o") + 1] = "/dev/null"
    torch.append({"directory": template["directory"], "file": path,
                  "command": shlex.join(args)})

# --cuda-only (CI): only the translation units with code that no CPU build
# compiles (an #if on RH_WITH_C10_CUDA or RH_HAVE_NCCL in the file or in a
# file its unity batch includes); the rest runs on LibTorch 2.6 in the
# Debian 13 chroot (tools/test.sh --torch2).
if os.environ.get("RH_TORCH2_CUDA_ONLY") == "1":
    cuda_re = re.compile(r"RH_WITH_C10_CUDA|RH_HAVE_NCCL")
    def has_cuda_paths(f):
        text = open(f, errors="replace").read()
        if "/Unity/" in f:
            text += "".join(open(m, errors="replace").read()
                            for m in re.findall(r'#include "(.*)"', text))
        return cuda_re.search(text) is not None
    torch = [e for e in torch if has_cuda_paths(e["file"])]
    if not torch:
        fail("--cuda-only: no translation unit has CUDA paths")

only = os.environ.get("RH_TORCH2_ONLY")
if only:
    torch = [e for e in torch if re.search(only, e["file"]) or any(
        re.search(only, line) for line in (open(e["file"]) if "/Unity/" in e["file"] else []))]
    if not torch:
        fail("RH_TORCH2_ONLY=%s matches no translation unit" % only)

depdir = os.path.join(build, "syntax-deps")
os.makedirs(depdir, exist_ok=True)

def check(i_e):
    i, e = i_e
    dep = os.path.join(depdir, "%d.d" % i)
    cmd = e["command"] + " -fsyntax-only -MD -MF " + shlex.quote(dep)
    t = time.monotonic()
    p = subprocess.run(cmd, shell=True, cwd=e["directory"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return e, dep, p.returncode, p.stdout, time.monotonic() - t

short = lambda f: os.path.relpath(f, root) if f.startswith(root) else os.path.relpath(f, build)
print("check_torch2: %d translation units (%d outside the CMake build), %d jobs"
      % (len(torch), sum(e["file"] in extra for e in torch), jobs), flush=True)
failed, warned = [], 0
tops = set(os.listdir(inc))  # ATen, c10, caffe2, torch, ...
# The longest first (as the last run measured them; else the unity files),
# so that no long one starts last.
times_file = os.path.join(build, "syntax-times.json")
try:
    last = json.load(open(times_file))
except (OSError, ValueError):
    last = {}
order = sorted(enumerate(torch), key=lambda ie: -last.get(
    ie[1]["file"], 100.0 if "/Unity/" in ie[1]["file"] else 0.0))
times = {}
with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
    for e, dep, rc, out, secs in pool.map(check, order):
        times[e["file"]] = round(secs, 1)
        # A LibTorch header that 2.6 lacks, found in /usr/include (1.13).
        stale = None
        if rc == 0:
            for h in open(dep).read().replace("\\\n", " ").split()[1:]:
                parts = os.path.normpath(h).split(os.sep)
                if h.startswith("/usr/include/") and len(parts) > 3 and parts[3] in tops:
                    stale = h
                    break
        print("  %-6s %5.1f s  %s" % ("ok" if rc == 0 and not stale else "FAILED", secs,
                                      short(e["file"])), flush=True)
        if out:
            warned += out.count(" warning: ")
            print(out, end="", flush=True)
        if stale:
            print("%s: includes %s, which LibTorch 2.6 does not have: it came from Debian 12's "
                  "LibTorch 1.13 in /usr/include" % (short(e["file"]), stale), flush=True)
        if rc != 0 or stale:
            failed.append(short(e["file"]))
last.update(times)
json.dump(last, open(times_file, "w"), indent=0)
if failed:
    fail("%d of %d failed against LibTorch 2.6: %s" % (len(failed), len(torch), ", ".join(failed)))
print("check_torch2: all %d compile against LibTorch 2.6 (%d warnings)" % (len(torch), warned))
PY
echo "check_torch2: done in $((SECONDS - start)) s"
