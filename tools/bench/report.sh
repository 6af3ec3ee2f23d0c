#!/usr/bin/env bash
# One benchmark report: runs every benchmark of the project and writes
# docs/BENCHMARKS.md (each figure a ratio against its peer measured in the
# same run, with the machine, the date and the commands) and its charts
# (docs/bench/*.png, matplotlib).
#
#   tools/bench/report.sh [--quick] [-o FILE.md]      (after tools/build.sh)
#
# --quick: fewer epochs, rounds and iterations; under 10 minutes on 2 cores
# (bench_torch26.sh, where it runs, adds about 4 more; bench_memory.sh, not timed
# at full size yet, more).
# The benchmarks (each also runs on its own):
#   rh_bench_step_overhead   runner-host's loop and hooks / a bare LibTorch loop
#   rh_bench_comm            the communicator's shared-memory / TCP transports
#   bench_ddp.sh             ddp / PyTorch's DistributedDataParallel
#   bench_zero.sh            zero stages 1-3 / ddp, memory beside the formulas,
#                            stage 1 / PyTorch's ZeroRedundancyOptimizer
#   bench_checkpoint.sh      checkpoint save and load (safetensors, torch, async) against a raw write + fsync of the same bytes and torch.save / torch.load
#   bench_one_rank.sh        ddp / zero / fsdp on one rank / single
#   bench_data.sh            the image loader / PyTorch's DataLoader + torchvision and the
#                            libjpeg-turbo decode limit; token files / a bare memcpy
#   bench_gpu.sh             when a GPU is visible (nvidia-smi -L): the gpt against PyTorch
#                            eager, float32 and bfloat16, with peak GPU memory
#   bench_torch26.sh         when run as root with the Debian 13 chroot and a LibTorch 2.6
#                            build (tools/test.sh --torch2): runner-host on 1.13 and on 2.6
#                            against PyTorch 2.6 (single, ddp, zero stage 1, FSDP2); else the
#                            report says why it was skipped
#   bench_tp.sh              likewise: ddp x tensor parallel 2 on a 24 M llama against PyTorch
#                            2.6's parallelize_module (step time, bytes per rank)
#   bench_memory.sh          likewise (root, the chroot, a 2.6 build): per-rank peak memory of
#                            every strategy against PyTorch 2.6's DDP, ZeroRedundancyOptimizer
#                            and FSDP2, beside the model-state formulas, and issue 39's goals
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
QUICK=0
OUT="$ROOT/docs/BENCHMARKS.md"
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    -o) OUT="$2"; shift ;;
    *) echo "usage: $0 [--quick] [-o FILE.md]" >&2; exit 2 ;;
  esac
  shift
done
CHARTS="$(dirname "$OUT")/bench"
mkdir -p "$CHARTS"
RAW="$(mktemp -d)"
trap 'rm -rf "$RAW"' EXIT
PY=/usr/bin/python3  # Debian's, with matplotlib and torch
export OMP_NUM_THREADS=1

if [ "$QUICK" = 1 ]; then
  STEP_ARGS=(--epochs 5 --rounds 3); COMM_ARGS=(--sizes 1,16 --reps 3)
  DDP_ITERS=100; DDP_ROUNDS=1; ZERO_ITERS=6; CKPT_SAVES=4; ONE_ROUNDS=3; T26_ITERS=6; MEM_ITERS=3; TP_ITERS=6; TP_ROUNDS=1
else
  STEP_ARGS=(--epochs 20 --rounds 7); COMM_ARGS=(--sizes 1,16,64 --reps 5)
  DDP_ITERS=300; DDP_ROUNDS=3; ZERO_ITERS=12; CKPT_SAVES=4; ONE_ROUNDS=9; T26_ITERS=12; MEM_ITERS=6; TP_ITERS=12; TP_ROUNDS=3
fi
MEM_RANKS=4
START=$(date +%s)
section() { echo "== $1 ($(($(date +%s) - START)) s)" >&2; }

section "step overhead"
CMD_STEP="OMP_NUM_THREADS=1 build/bin/rh_bench_step_overhead ${STEP_ARGS[*]}"
"$BUILD/bin/rh_bench_step_overhead" "${STEP_ARGS[@]}" > "$RAW/step.txt" 2>&1
section "communicator"
CMD_COMM="OMP_NUM_THREADS=1 build/bin/rh_bench_comm --ranks 2 ${COMM_ARGS[*]}"
"$BUILD/bin/rh_bench_comm" --ranks 2 "${COMM_ARGS[@]}" > "$RAW/comm.txt" 2>&1
section "ddp vs PyTorch DDP"
CMD_DDP="RH_BENCH_ROUNDS=$DDP_ROUNDS RH_BENCH_SWEEP='1 25' tools/bench/bench_ddp.sh $DDP_ITERS"
RH_BENCH_ROUNDS=$DDP_ROUNDS RH_BENCH_SWEEP="1 25" "$ROOT/tools/bench/bench_ddp.sh" "$DDP_ITERS" > "$RAW/ddp.txt" 2>&1
section "zero"
CMD_ZERO="tools/bench/bench_zero.sh $ZERO_ITERS"
"$ROOT/tools/bench/bench_zero.sh" "$ZERO_ITERS" > "$RAW/zero.txt" 2>&1
section "checkpoint"
CMD_CKPT="tools/bench/bench_checkpoint.sh $CKPT_SAVES"
"$ROOT/tools/bench/bench_checkpoint.sh" "$CKPT_SAVES" > "$RAW/ckpt.txt" 2>&1
section "one rank"
CMD_ONE="tools/bench/bench_one_rank.sh $ONE_ROUNDS"
"$ROOT/tools/bench/bench_one_rank.sh" "$ONE_ROUNDS" > "$RAW/one.txt" 2>&1
section "data loader"
if [ "$QUICK" = 1 ]; then DATA_ENV=(RH_BENCH_ROUNDS=1); DATA_ARGS=(2 400); else DATA_ENV=(); DATA_ARGS=(2 2000); fi
CMD_DATA="${DATA_ENV[*]} tools/bench/bench_data.sh ${DATA_ARGS[*]}"
env "${DATA_ENV[@]}" "$ROOT/tools/bench/bench_data.sh" "${DATA_ARGS[@]}" > "$RAW/data.txt" 2>&1
# The GPU section, where a GPU is visible (with a CUDA build: RH_TORCH).
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  section "GPU"
  "$ROOT/tools/bench/bench_gpu.sh" > "$RAW/gpu.txt" 2>&1 || true
fi
# The benchmarks against PyTorch 2.6 run only as root, with the Debian 13
# chroot and a LibTorch 2.6 build; otherwise the report gives the reason.
# optional_bench TITLE RAW_NAME SCRIPT ARGS...: the script's output in
# $RAW/RAW_NAME.txt, or "Skipped in this run: <why>." there.
optional_bench() {
  local title=$1 name=$2 script=$3 why
  shift 3
  section "$title"
  why=$("$ROOT/tools/bench/$script" --why-not "$@")
  if [ -z "$why" ]; then
    "$ROOT/tools/bench/$script" "$@" > "$RAW/$name.txt" 2> "$RAW/$name.err" ||
      { echo "$script failed (its table keeps what ran):" >&2; tail -5 "$RAW/$name.err" >&2; }
  else
    echo "skipped: $why" >&2
    echo "Skipped in this run: $why." > "$RAW/$name.txt"
  fi
}
CMD_T26="tools/bench/bench_torch26.sh $T26_ITERS"
optional_bench "PyTorch 2.6 peers" torch26 bench_torch26.sh "$T26_ITERS"  # issue 38
CMD_MEM="tools/bench/bench_memory.sh $MEM_RANKS $MEM_ITERS"
optional_bench "per-rank memory against PyTorch 2.6" memory bench_memory.sh "$MEM_RANKS" "$MEM_ITERS"  # issue 39
CMD_TP="tools/bench/bench_tp.sh $TP_ITERS $TP_ROUNDS"
optional_bench "tensor parallel against PyTorch 2.6" tp bench_tp.sh "$TP_ITERS" "$TP_ROUNDS"  # issue 42
section "report"
ELAPSED=$(($(date +%s) - START))

MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc --all) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(. /etc/os-release; echo "$PRETTY_NAME"), LibTorch $(dpkg-query -W -f '${Version}' libtorch-dev 2>/dev/null || echo '?')"
"$PY" - "$RAW" "$OUT" "$CHARTS" "$QUICK" "$ELAPSED" "$MACHINE" \
  "$CMD_STEP" "$CMD_COMM" "$CMD_DDP" "$CMD_ZERO" "$CMD_CKPT" "$CMD_ONE" "$CMD_T26" "$CMD_MEM" \
  "$CMD_DATA" "$CMD_TP" <<'PY'
import datetime, os, re, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

raw, out, charts, quick, elapsed, machine = sys.argv[1:7]
cmd = dict(zip(["step", "comm", "ddp", "zero", "ckpt", "one"], sys.argv[7:13]))
text = {k: open(os.path.join(raw, k + ".txt")).read() for k in cmd}
rel = os.path.relpath(charts, os.path.dirname(out))

def bar(name, labels, values, ylabel, title, ref=1.0):
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.barh(labels[::-1], values[::-1], color="#4477aa")
    if ref is not None:
        ax.axvline(ref, color="black", lw=0.8, ls="--")
    ax.set_xlabel(ylabel)
    ax.set_title(title, fontsize=10)
    for y, v in enumerate(values[::-1]):
        ax.text(v, y, f" {v:.3f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(charts, name), dpi=110)
    plt.close(fig)
    return f"![{title}]({rel}/{name})"

md = ["# Benchmarks", "",
      f"Written by `tools/bench/report.sh{' --quick' if quick == '1' else ''}` on "
      f"{datetime.date.today().isoformat()} in {elapsed} s. Machine: {machine}. "
      "Every figure is a ratio against its peer measured in the same run (a bare LibTorch loop, "
      "PyTorch's own DDP and ZeroRedundancyOptimizer from Debian's python3-torch, the other "
      "transport, a raw write of the same bytes); this is a shared machine, so ratios move by several percent from run to "
      "run: compare runs of the same report, not single figures." , ""]

# Step overhead.
rows = re.findall(r"^(\S.*?)\s{2,}([0-9.]+) \(([0-9.]+)-([0-9.]+)\)\s+([0-9.]+) \(([0-9.]+)-([0-9.]+)\)$",
                  text["step"], re.M)
md += ["## Runner overhead on small models", "", f"    {cmd['step']}", ""]
if rows:
    md += ["| variant | ms/iteration | ratio to its paired bare loop, median (min-max) |", "|---|---:|---:|"]
    md += [f"| {r[0].strip()} | {r[1]} | {r[4]} ({r[5]}-{r[6]}) |" for r in rows]
    md += ["", bar("step_overhead.png", [r[0].strip() for r in rows], [float(r[4]) for r in rows],
                   "ratio to the bare LibTorch loop", "runner-host loop / bare LibTorch loop (quickstart MLP)")]
else:
    md += ["```", text["step"].strip()[-2000:], "```"]
md.append("")

# Communicator.
rows = re.findall(r"^\s*(\d+)\s+(\w+)\s+([0-9.]+) \[.*?\]\s+([0-9.]+) \[.*?\]\s+([0-9.]+)$", text["comm"], re.M)
md += ["## Communicator transports (2 ranks, one host)", "", f"    {cmd['comm']}", "",
       "| MiB | collective | TCP ring ms | shared memory ms | shm / tcp |", "|---:|---|---:|---:|---:|"]
md += [f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} |" for r in rows]
if rows:
    md += ["", bar("comm.png", [f"{r[1]} {r[0]} MiB" for r in rows], [float(r[4]) for r in rows],
                   "time ratio (shared memory / TCP ring)", "shared-memory collectives / TCP ring")]
md.append("")

# ddp.
md += ["## ddp against PyTorch DDP", "", f"    {cmd['ddp']}", "", "```", text["ddp"].strip(), "```"]
m = re.search(r"ratio runner-host / PyTorch: ([0-9.]+) .*?, ([0-9.]+) \(TCP", text["ddp"])
if m:
    md += ["", bar("ddp.png", ["shared memory (default)", "TCP ring (as PyTorch)"],
                   [float(m.group(1)), float(m.group(2))], "step time ratio",
                   "runner-host ddp / PyTorch DDP (MLP, 2 ranks)")]
md.append("")

# zero.
md += ["## zero stages against ddp (50 M gpt, 2 ranks)", "", f"    {cmd['zero']}", ""]
md += [l for l in text["zero"].splitlines() if l.startswith("|")]
md += [""] + [l for l in text["zero"].splitlines() if not l.startswith("|") and l.strip()]
zrows = [l.split("|")[1:-1] for l in text["zero"].splitlines() if l.startswith("| ") and "strategy" not in l]
if zrows:
    md += ["", bar("zero.png", [r[0].strip() for r in zrows], [float(r[-1]) for r in zrows],
                   "step time / ddp's", "zero stages / ddp (step time)")]
md += ["", "Memory columns and how they are measured: `docs/zero.md`, \"Memory and speed\".", ""]

# The benchmarks against PyTorch 2.6 (bench_torch26.sh, bench_memory.sh):
# each prints its own command line, tables and what differs; a skip says why.
def optional_section(name, title, command):
    path = os.path.join(raw, name + ".txt")
    if not os.path.exists(path):
        return []
    body = open(path).read().lstrip("\n").rstrip()  # its first line, the command, is indented
    lines = [f"## {title}", ""]
    lines += [f"    {command}", "", body] if body.startswith("Skipped") else body.splitlines()
    return lines + [""]


md += optional_section("torch26", "runner-host on LibTorch 1.13 and 2.6 against PyTorch 2.6", sys.argv[13])
md += optional_section("memory", "Per-rank peak memory against PyTorch 2.6", sys.argv[14])
md += optional_section("tp", "Tensor parallel against PyTorch 2.6's parallelize_module", sys.argv[16])

# Checkpoint.
md += ["## Checkpoint save and load throughput", "", f"    {cmd['ckpt']}", "", "```", text["ckpt"].strip(), "```", ""]

# One rank against single.
md += ["## A world of one: ddp, zero, fsdp on one rank / single", "", f"    {cmd['one']}", "",
       "```", text["one"].strip(), "```", ""]

# The data loaders.
md += ["## Data loading: images against torchvision, tokens against memcpy", "",
       f"    {sys.argv[15].strip()}", "", "```",
       open(os.path.join(raw, "data.txt")).read().strip(), "```", ""]

# The GPU, when one was visible: bench_gpu.sh's own tables.
gpu = os.path.join(raw, "gpu.txt")
if os.path.exists(gpu):
    md += ["    tools/bench/bench_gpu.sh", ""] + open(gpu).read().strip().splitlines() + [""]

open(out, "w").write("\n".join(md) + "\n")
print(f"wrote {out} and {charts}/*.png")
PY
