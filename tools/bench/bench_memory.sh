#!/usr/bin/env bash
# Per-rank peak memory of every runner-host strategy against PyTorch 2.6's
# own DDP, ZeroRedundancyOptimizer and FSDP2 on the same model, in one run,
# beside the ZeRO paper's model-state formulas (issue 39, item 4).
#
# The job: gpt vocab 256, block_size (T) 128, dim 512, depth 8, heads 8
# (Psi = 25.5 M parameters), batch 8 per rank, AdamW, float32, N ranks on
# this host, a few iterations. Rows, runner-host with each strategy's
# default keys (no bucket or prefetch key written):
#   single  strategy single, one process     peer: pytorch_gpt.py (eager, --device cpu)
#   ddp     ddp                              peer: pytorch_zero.py --ddp-only (AdamW over DDP)
#   zero1   zero stage 1                     peer: pytorch_zero.py (ZeroRedundancyOptimizer over DDP)
#   zero2   zero stage 2                     (PyTorch has none)
#   zero3   zero stage 3                     peer: pytorch_fsdp2.py (FSDP2 fully_shard, its 2.6 patches)
#   fsdp    fsdp sharding_strategy full_shard  peer: the same FSDP2 run
# runner-host on LibTorch 2.6 in the Debian 13 chroot (tools/torch2_chroot.sh;
# like-for-like with the peers, Debian 13's python3-torch 2.6) and runner-host
# on LibTorch 1.13 here (Debian 12) as a second column.
#
#   tools/bench/bench_memory.sh [ranks] [iterations]      (as root)
#   tools/bench/bench_memory.sh --why-not [ranks] [iterations]   why it cannot run here (nothing if it can)
#     ranks       N (default 4; single is one process whatever N)
#     iterations  of every run (default 6)
#
# Measurement, as issue 39 measured it: each rank is a process of its own
# and its figure is that process's peak RSS, MiB. runner-host's ranks are
# started by a small Python parent (RANK, WORLD_SIZE, LOCAL_RANK,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT: what the built-in launcher
# sets; runner-host reads them as from torchrun), which reaps each with
# wait4 and keeps its ru_maxrss. The peers start their ranks themselves
# (torch.multiprocessing.spawn) and each rank prints its own peak at the end
# (--rss-per-rank: VmHWM; a spawned rank's ru_maxrss would also count the
# spawning process's, peer_common.py). From each rank's peak the same rank's
# peak with a tiny gpt (dim 64, depth 1; the same T, batch, ranks, strategy
# and program) measured in the same run is taken away: what is left is what
# the model costs (its state, activations, buffers), not the program, its
# libraries and the rendezvous. The table gives the largest rank and rank 0.
# Theory: model state per rank, bytes: single and ddp 16Psi, zero1
# 8Psi + 8Psi/N, zero2 4Psi + 12Psi/N, zero3 and fsdp 16Psi/N + one gathered
# unit (4 x a block's elements); Psi from the model's shape (as runner-host's
# gpt lays it out; activations are not in it). The issue's goals are checked
# at the end (met / missed): ddp <= DDP, zero1 <= ZeroRedundancyOptimizer,
# zero3 and fsdp <= FSDP2, zero2 < zero1 < ddp, zero3 and fsdp <= 0.7 x ddp,
# and --estimate-memory (run on each job too) within 15% of rank 0's figure.
# OMP_NUM_THREADS=1 everywhere.
#
# Needs: root (the chroot), tools/build.sh's build/ (RH_BUILD_DIR) and a
# LibTorch 2.6 build (RH_TORCH2_BUILD_DIR, default build-torch26/: tools/test.sh
# --torch2 makes it; one outside this checkout is bound into the chroot at
# its own path, as bench_torch26.sh does). RH_TORCH2_CHROOT: the chroot.
# RH_BENCH_ROWS: a subset of "single ddp zero1 zero2 zero3 fsdp".
# RH_BENCH_KEEP=1 keeps the work folder (build-bench_memory.*: every run's log,
# metrics and per-rank RSS). RH_BENCH_MEM_SMALL=1: a gpt of dim 128, depth 2
# instead of the issue's (checks this script end to end in 90 s on 2 cores; the
# output says so). RH_BENCH_TIMEOUT: seconds one run may take (default 1800).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH="$ROOT/tools/bench"
# shellcheck source=tools/bench/torch26_common.sh
source "$BENCH/torch26_common.sh"  # BUILD, BUILD26, CHROOT
BASE_DIM=64   # the tiny gpt whose peak is taken away
BASE_DEPTH=1

gpt_job() { t26_gpt_job "$1" "$2" 128 "$3" "$4" 8; }  # FILE ITERS DIM DEPTH

# The strategy of a row: its type and what picks the row, nothing else.
strategy() {  # ROW
  case "$1" in
    single) echo "{type: single}" ;;
    ddp) echo "{type: ddp}" ;;
    zero1) echo "{type: zero, zero_optimization: {stage: 1}}" ;;
    zero2) echo "{type: zero, zero_optimization: {stage: 2}}" ;;
    zero3) echo "{type: zero, zero_optimization: {stage: 3}}" ;;
    fsdp) echo "{type: fsdp, sharding_strategy: full_shard}" ;;
  esac
}

# OUT NPROC LIMIT CMD...: runs CMD with its output in OUT.log; NPROC 0: once;
# else NPROC times, as ranks 0..NPROC-1 of one job on this host (the launcher's
# variables, a free port). Each process is reaped with wait4: OUT.rss has its
# ru_maxrss (MiB) by rank, and the exit code. The first failure kills the
# others; so does LIMIT seconds.
RANKS_PY='import json, os, signal, socket, subprocess, sys
out, nproc, limit, cmd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
plan = [(0, {})]
if nproc > 0:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = str(s.getsockname()[1])
    s.close()
    plan = [(r, {"RANK": str(r), "WORLD_SIZE": str(nproc), "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": str(nproc),
                 "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}) for r in range(nproc)]
running, rss, rc, timed_out = {}, {}, 0, False

def kill_all():  # os.kill: Popen.kill would poll, and so reap, a rank wait4 is to reap
    for p in running.values():
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

def on_alarm(*_):
    global timed_out
    timed_out = True
    kill_all()

signal.signal(signal.SIGALRM, on_alarm)
signal.alarm(limit)
with open(out + ".log", "w") as log:
    for r, env in plan:
        running[r] = subprocess.Popen(cmd, env=dict(os.environ, **env), stdout=log, stderr=subprocess.STDOUT)
    pids = {p.pid: r for r, p in running.items()}
    while running:
        pid, status, usage = os.wait4(-1, 0)
        r = pids[pid]
        code = os.waitstatus_to_exitcode(status)
        running.pop(r).returncode = code
        rss[r] = usage.ru_maxrss / 1024  # KiB
        if code != 0 and rc == 0:
            rc = code
            kill_all()
signal.alarm(0)
json.dump({"ranks": rss, "rc": rc, "timed_out": timed_out}, open(out + ".rss", "w"))
sys.exit(rc or (124 if timed_out else 0))'
measure() {  # PY OUT NPROC CMD...
  local py=$1 out=$2 nproc=$3
  shift 3
  "$py" -c "$RANKS_PY" "$out" "$nproc" "${RH_BENCH_TIMEOUT:-1800}" "$@" ||
    { echo "  FAILED: $(basename "$out") (log: $out.log):" >&2; tail -5 "$out.log" | sed 's/^/    /' >&2; }
}

# One row's runner-host runs (the model, then the tiny one) on one side's build.
run_rh() {  # PY RUNNER_HOST ROW OUT_DIR ITERS NPROC TAG DIM DEPTH
  local py=$1 rh=$2 row=$3 dir=$4 iters=$5 nproc=$6 tag=$7 dim=$8 depth=$9 size d l
  [ "$row" = single ] && nproc=0
  for size in full base; do
    if [ "$size" = full ]; then d=$dim l=$depth; else d=$BASE_DIM l=$BASE_DEPTH; fi
    gpt_job "$dir/gpt.$tag.$row.$size.yaml" "$iters" "$d" "$l"
    measure "$py" "$dir/$tag.$row.$size" "$nproc" "$rh" --config "$dir/gpt.$tag.$row.$size.yaml" \
      --set "work_dir=$dir/$tag.$row.$size" --set "strategy=$(strategy "$row")"
    # What --estimate-memory says of the same job, beside what it measured.
    "$rh" --config "$dir/gpt.$tag.$row.$size.yaml" --estimate-memory \
      $([ "$nproc" = 0 ] || echo --nproc-per-node "$nproc") --set "strategy=$(strategy "$row")" \
      > "$dir/$tag.$row.$size.est" 2>&1 || echo "  FAILED: the estimate of $tag.$row.$size" >&2
  done
}

# One peer's runs, the model then the tiny one (inside the chroot: python3 is
# Debian 13's, torch 2.6). Each starts its own ranks; each rank prints its peak.
run_peer() {  # PEER OUT_DIR ITERS NPROC DIM DEPTH
  local peer=$1 dir=$2 iters=$3 nproc=$4 dim=$5 depth=$6 size d l gpt ranks
  for size in full base; do
    if [ "$size" = full ]; then d=$dim l=$depth; else d=$BASE_DIM l=$BASE_DEPTH; fi
    gpt=(--vocab 256 --block 128 --dim "$d" --depth "$l" --heads 8 --batch 8)
    ranks=(--ranks "$nproc" --rss-per-rank "${gpt[@]}" --warmup 1 --iters $((iters - 1)))
    case "$peer" in
      single) measure python3 "$dir/peer.single.$size" 0 python3 "$BENCH/pytorch_gpt.py" --device cpu \
        --mode sdpa "${gpt[@]}" --warmup 1 --steps $((iters - 1)) ;;
      ddp) measure python3 "$dir/peer.ddp.$size" 0 python3 "$BENCH/pytorch_zero.py" --ddp-only "${ranks[@]}" ;;
      zero1) measure python3 "$dir/peer.zero1.$size" 0 python3 "$BENCH/pytorch_zero.py" "${ranks[@]}" ;;
      fsdp2) measure python3 "$dir/peer.fsdp2.$size" 0 python3 "$BENCH/pytorch_fsdp2.py" "${ranks[@]}" ;;
    esac
  done
}

# Inside the chroot: runner-host 2.6's runs of one row, and its peer's ("":
# none, or already run for another row).
if [ "${1:-}" = --inside ]; then
  row=$2 dir=$3 iters=$4 nproc=$5 build26=$6 peer=$7 dim=$8 depth=$9
  export OMP_NUM_THREADS=1
  run_rh python3 "$build26/bin/runner-host" "$row" "$dir" "$iters" "$nproc" rh26 "$dim" "$depth"
  [ -z "$peer" ] || run_peer "$peer" "$dir" "$iters" "$nproc" "$dim" "$depth"
  exit 0
fi

WHY_NOT=0
if [ "${1:-}" = --why-not ]; then WHY_NOT=1; shift; fi  # report.sh: print why it cannot run, if it cannot
NPROC="${1:-4}"
ITERS="${2:-6}"
ROWS="${RH_BENCH_ROWS:-single ddp zero1 zero2 zero3 fsdp}"
if [ -n "${RH_BENCH_MEM_SMALL:-}" ]; then DIM=128 DEPTH=2; else DIM=512 DEPTH=8; fi
export OMP_NUM_THREADS=1

# Why this cannot run here, if it cannot (report.sh prints the reason).
why_not() {
  local common
  common=$(t26_why_not)
  [ -z "$common" ] || { echo "$common"; return; }
  if ! [[ $NPROC =~ ^[0-9]+$ ]] || ((NPROC < 2)); then echo "ranks: 2 or more, not '$NPROC'"; return; fi
  if ! [[ $ITERS =~ ^[0-9]+$ ]] || ((ITERS < 2)); then
    echo "iterations: 2 or more (the peers leave 1 out of their timing), not '$ITERS'"
    return
  fi
  local row
  for row in $ROWS; do
    [ -n "$(strategy "$row")" ] || { echo "RH_BENCH_ROWS: '$row' is none of single ddp zero1 zero2 zero3 fsdp"; return; }
  done
}
t26_start bench_memory "$WHY_NOT"  # WORK

# shellcheck disable=SC2016  # expanded by the bash that runs it (here, and in the chroot)
INFO_SH='printf "%s|%s|%s\n" "$(dpkg-query -W -f "\${Version}" libtorch-dev 2>/dev/null)" \
  "$(python3 -c "import sys; print(sys.version.split()[0])")" \
  "$(python3 -c "import torch; print(torch.__version__)" 2>/dev/null || echo -)"'
INFO113=$(bash -c "$INFO_SH")
INFO26=$(in_chroot bash -c "$INFO_SH" 2>&1 | tail -1)

echo "runner-host 1.13 ($BUILD) and 2.6 ($BUILD26) against PyTorch ${INFO26##*|}; gpt dim $DIM depth $DEPTH," \
  "$NPROC ranks, $ITERS iterations; OMP_NUM_THREADS=1; $(date -u '+%F %H:%M') UTC on $(nproc --all) cores," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
START=$SECONDS
declare -A PEER_OF=([single]=single [ddp]=ddp [zero1]=zero1 [zero2]="" [zero3]=fsdp2 [fsdp]=fsdp2)
PEERS_RUN=" "
for row in $ROWS; do
  echo "== $row ($((SECONDS - START)) s)" >&2
  peer=${PEER_OF[$row]}
  case "$PEERS_RUN" in *" $peer "*) peer="" ;; esac  # FSDP2: once for zero3 and fsdp
  [ -z "$peer" ] || PEERS_RUN+="$peer "
  # runner-host 1.13 here, then runner-host 2.6 and the peer in the chroot.
  run_rh /usr/bin/python3 "$BUILD/bin/runner-host" "$row" "$WORK" "$ITERS" "$NPROC" rh113 "$DIM" "$DEPTH"
  in_chroot bash tools/bench/bench_memory.sh --inside "$row" "$WORK" "$ITERS" "$NPROC" "$BUILD26" "$peer" \
    "$DIM" "$DEPTH" > "$WORK/chroot.$row.log" 2>&1 ||
    { echo "  the chroot run failed:" >&2; tail -5 "$WORK/chroot.$row.log" >&2; }
  grep -h "FAILED" -A6 "$WORK/chroot.$row.log" >&2 || true
done
ELAPSED=$((SECONDS - START))

CMD="tools/bench/bench_memory.sh $NPROC $ITERS"
[ -n "${RH_BENCH_ROWS:-}" ] && CMD="RH_BENCH_ROWS='$RH_BENCH_ROWS' $CMD"
[ -n "${RH_BENCH_MEM_SMALL:-}" ] && CMD="RH_BENCH_MEM_SMALL=$RH_BENCH_MEM_SMALL $CMD"
[ -n "${RH_TORCH2_BUILD_DIR:-}" ] && CMD="RH_TORCH2_BUILD_DIR=$RH_TORCH2_BUILD_DIR $CMD"
/usr/bin/python3 - "$WORK" "$ROWS" "$NPROC" "$ITERS" "$DIM" "$DEPTH" "$BASE_DIM" "$BASE_DEPTH" \
  "${RH_BENCH_MEM_SMALL:-}" "$INFO113" "$INFO26" "$CMD" "$ELAPSED" <<'PY'
import json, os, re, sys
(work, rows, nproc, iters, dim, depth, base_dim, base_depth, small, info113, info26, cmd,
 elapsed) = sys.argv[1:]
rows, nproc, dim, depth = rows.split(), int(nproc), int(dim), int(depth)
V, T = 256, 128
PEER_OF = {"single": "single", "ddp": "ddp", "zero1": "zero1", "zero2": None, "zero3": "fsdp2", "fsdp": "fsdp2"}


def params(d, l):
    """runner-host's gpt: token and position embeddings, l blocks (LayerNorm,
    qkv, proj, LayerNorm, fc1, fc2, with biases), a final LayerNorm, a
    bias-free head."""
    return l * block(d) + (V + T) * d + 2 * d + V * d


def block(d):
    return 12 * d * d + 13 * d


def peaks(prefix):
    """{rank: peak RSS MiB} of one run; None when it failed, did not run or
    a rank's figure is missing. A peer's own per-rank lines win over wait4's
    figure of its one process (which is its largest process)."""
    try:
        d = json.load(open(prefix + ".rss"))
    except (OSError, ValueError):
        return None
    if d["rc"] != 0:
        return None
    try:
        text = open(prefix + ".log").read()
    except OSError:
        text = ""
    own = {int(r): float(v) for r, v in re.findall(r"^rank (\d+): peak rss ([0-9.]+) MiB", text, re.M)}
    if own:
        return own if sorted(own) == list(range(nproc)) else None
    return {int(r): v for r, v in d["ranks"].items()}


def cost(prefix):
    """(largest rank, rank 0, full peak of the largest rank, tiny peak of the
    same rank) of peak - baseline, MiB; None when either run is missing."""
    full, base = peaks(prefix + ".full"), peaks(prefix + ".base")
    if full is None or base is None or sorted(full) != sorted(base):
        return None
    delta = {r: full[r] - base[r] for r in full}
    top = max(delta, key=delta.get)
    return delta[top], delta[0], full[top], base[top]


def estimate(prefix):
    """--estimate-memory's total for rank 0 (activations included), the
    model's - the tiny model's, MiB; None when either is missing."""
    totals = []
    for size in ("full", "base"):
        try:
            text = open(f"{prefix}.{size}.est").read()
        except OSError:
            return None
        m = re.search(r"^bytes (?:rank 0|ranks 0-\d+):.* total (\d+)$", text, re.M)
        if not m:
            return None
        totals.append(int(m.group(1)))
    return (totals[0] - totals[1]) / 2 ** 20


def metrics_rank0(path):
    """runner-host rank 0's own memory_mb of its last step (metrics hook)."""
    try:
        lines = [json.loads(l) for l in open(os.path.join(path, "metrics.jsonl"))]
    except (OSError, ValueError):
        return None
    train = [l for l in lines if l.get("mode") == "train" and "memory_mb" in l]
    return train[-1]["memory_mb"] if train else None


psi = params(dim, depth)
l113, py113, _ = (info113.split("|") + ["?"] * 3)[:3]
l26, py26, t26 = (info26.split("|") + ["?"] * 3)[:3]
MIB = 2 ** 20
theory = {"single": ("16Psi", 16 * psi), "ddp": ("16Psi", 16 * psi),
          "zero1": ("8Psi + 8Psi/N", 8 * psi + 8 * psi / nproc),
          "zero2": ("4Psi + 12Psi/N", 4 * psi + 12 * psi / nproc),
          "zero3": ("16Psi/N + 4 x unit", 16 * psi / nproc + 4 * block(dim)),
          "fsdp": ("16Psi/N + 4 x unit", 16 * psi / nproc + 4 * block(dim))}
rh26 = {r: cost(os.path.join(work, f"rh26.{r}")) for r in rows}
rh113 = {r: cost(os.path.join(work, f"rh113.{r}")) for r in rows}
peer = {p: cost(os.path.join(work, f"peer.{p}")) for p in set(PEER_OF[r] for r in rows) if p}
est26 = {r: estimate(os.path.join(work, f"rh26.{r}")) for r in rows}
est113 = {r: estimate(os.path.join(work, f"rh113.{r}")) for r in rows}

NAMES = {"single": "single (1 process)", "ddp": "ddp", "zero1": "zero stage 1", "zero2": "zero stage 2",
         "zero3": "zero stage 3", "fsdp": "fsdp full_shard"}
PEER_NAMES = {"single": "eager (1 process)", "ddp": "DDP", "zero1": "DDP + ZeroRedundancyOptimizer",
              "fsdp2": "FSDP2 fully_shard (patched)"}
def f(x, fmt="{:.0f}"):
    return "-" if x is None else fmt.format(x)


def both(c):  # the largest rank (rank 0)
    return "-" if c is None else f"{c[0]:.0f} ({c[1]:.0f})"


def raw(c):  # the largest rank's peaks: the model's - the tiny model's
    return "-" if c is None else f"{c[2]:.0f} - {c[3]:.0f}"


out = []
if small:
    out += [f"**Check run, not the issue's job: RH_BENCH_MEM_SMALL (gpt dim {dim}, depth {depth}).**", ""]
out += [f"    {cmd}", "",
        f"Per-rank peak memory, runner-host on LibTorch 1.13 (Debian 12) and 2.6 (Debian 13 chroot) against "
        f"PyTorch {t26} in the same run, {elapsed} s: gpt vocab {V}, T {T}, dim {dim}, depth {depth}, "
        f"heads 8 (Psi = {psi / 1e6:.2f} M), batch 8 per rank, AdamW, float32, N = {nproc} ranks, {iters} "
        f"iterations, OMP_NUM_THREADS=1. Each figure: a rank's peak RSS minus the same rank's with a tiny gpt "
        f"(dim {base_dim}, depth {base_depth}; same T, batch, ranks, strategy, program) in this run, MiB: the "
        f"largest rank, rank 0 in brackets. Theory: model state per rank (parameters, gradients, AdamW's two "
        f"moments; a unit is one block, {block(dim) / 1e6:.2f} M), MiB; the measured figures also hold "
        f"activations and buffers.", "",
        "| strategy | theory: model state per rank | runner-host 2.6 | runner-host 1.13 | PyTorch 2.6 peer | "
        "peer | 2.6 / peer |",
        "|---|---:|---:|---:|---|---:|---:|"]
for r in rows:
    name, value = theory[r]
    p = PEER_OF[r]
    pc = peer.get(p) if p else None
    ratio = rh26[r][0] / pc[0] if rh26[r] and pc and pc[0] > 0 else None
    out.append(f"| {NAMES[r]} | {name} = {value / MIB:.0f} | {both(rh26[r])} | {both(rh113[r])} | "
               f"{PEER_NAMES[p] if p else '(none)'} | {both(pc)} | {f(ratio, '{:.2f}')} |")
out += ["", "Peaks of the largest rank, the model's - the tiny model's, MiB:", "",
        "| strategy | runner-host 2.6 | runner-host 1.13 | PyTorch 2.6 peer |", "|---|---:|---:|---:|"]
for r in rows:
    p = PEER_OF[r]
    out.append(f"| {NAMES[r]} | {raw(rh26[r])} | {raw(rh113[r])} | {raw(peer.get(p)) if p else '-'} |")

out += ["", "`--estimate-memory` (rank 0, activations included, the model's - the tiny model's) against "
        "rank 0's measured peak - baseline, MiB:", "",
        "| strategy | estimate 2.6 | measured 2.6 | estimate / measured | estimate 1.13 | measured 1.13 | "
        "estimate / measured |", "|---|---:|---:|---:|---:|---:|---:|"]
def vs(e, c):
    return "-" if e is None or c is None or c[1] <= 0 else f"{e / c[1]:.2f}"
for r in rows:
    out.append(f"| {NAMES[r]} | {f(est26[r])} | {f(rh26[r][1] if rh26[r] else None)} | {vs(est26[r], rh26[r])} | "
               f"{f(est113[r])} | {f(rh113[r][1] if rh113[r] else None)} | {vs(est113[r], rh113[r])} |")

# The goals of issue 39, on the largest rank.
def goal(label, test):
    """test(figures, peers) -> (met, text) or None when a figure is missing."""
    parts = []
    for side, figures in (("runner-host 2.6", rh26), ("runner-host 1.13", rh113)):
        v = {r: c[0] for r, c in figures.items() if c}
        pv = {k: c[0] for k, c in peer.items() if c}
        try:
            met, text = test(v, pv)
        except KeyError:
            parts.append(f"{side} not measured")
            continue
        parts.append(f"{side} {'met' if met else 'MISSED'} ({text})")
    return f"- {label}: " + "; ".join(parts)

def at_most(a, b):
    return a <= b, f"{a:.0f} <= {b:.0f}" if a <= b else f"{a:.0f} > {b:.0f}"

out += ["", "Goals of issue 39 (the largest rank, MiB):",
        goal("ddp <= DDP", lambda v, p: at_most(v["ddp"], p["ddp"])),
        goal("zero1 <= ZeroRedundancyOptimizer", lambda v, p: at_most(v["zero1"], p["zero1"])),
        goal("zero3 <= FSDP2", lambda v, p: at_most(v["zero3"], p["fsdp2"])),
        goal("fsdp <= FSDP2", lambda v, p: at_most(v["fsdp"], p["fsdp2"])),
        goal("zero2 < zero1 < ddp", lambda v, p: (v["zero2"] < v["zero1"] < v["ddp"],
                                                 f"{v['zero2']:.0f}, {v['zero1']:.0f}, {v['ddp']:.0f}")),
        goal("zero3 <= 0.7 x ddp", lambda v, p: at_most(v["zero3"], 0.7 * v["ddp"])),
        goal("fsdp <= 0.7 x ddp", lambda v, p: at_most(v["fsdp"], 0.7 * v["ddp"]))]
for side, e, c in (("runner-host 2.6", est26, rh26), ("runner-host 1.13", est113, rh113)):
    off = {r: e[r] / c[r][1] - 1 for r in rows if e[r] is not None and c[r] and c[r][1] > 0}
    if off:
        worst = max(off, key=lambda r: abs(off[r]))
        out.append(f"- the estimate within 15% of rank 0's measured peak - baseline, every strategy: {side} "
                   f"{'met' if abs(off[worst]) <= 0.15 else 'MISSED'} (furthest: {NAMES[worst]}, "
                   f"{off[worst] * 100:+.0f}%)")

# runner-host rank 0's own figure (metrics hook) against wait4's.
gaps = []
for tag in ("rh26", "rh113"):
    for r in rows:
        for size in ("full", "base"):
            m, p = metrics_rank0(os.path.join(work, f"{tag}.{r}.{size}")), peaks(os.path.join(work, f"{tag}.{r}.{size}"))
            if m is not None and p and 0 in p:
                gaps.append(p[0] - m)
attention = 8 * 8 * T * T * 4 / MIB  # B x H x T x T float32
out += ["", "What differs besides the runner:",
        f"- LibTorch {l113} (Debian 12) and {l26} (Debian 13); the peers run Debian 13's python3-torch {t26} "
        f"on Python {py26}.",
        "- Ranks: runner-host's are started by the measuring process with the variables its launcher sets "
        "(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; read as from torchrun), so "
        "that each is reaped with its own ru_maxrss; the launcher (a few MB, no LibTorch) is in no row. The "
        "peers spawn theirs (torch.multiprocessing) and each reports its VmHWM (its own address space: a "
        "spawned rank's ru_maxrss also counts its parent's high-water mark)."
        + (f" runner-host's rank 0 also reports its peak in its metrics (memory_mb of its last step: "
           f"getrusage, read at most every 100 ms): wait4's figure is {min(gaps):.1f} to {max(gaps):.1f} MiB "
           "above it (what the process held after that read, to its end)." if gaps else ""),
        "- Heap: runner-host maps every block of 1 MiB or more for itself and returns it on free (its "
        "default, env_cfg.heap: release; host/launch/HeapPolicy.hpp); the peers run glibc's defaults (blocks "
        "above 32 MiB at most mmap'd and returned on free, smaller ones kept in the heap). A peak counts what "
        "was resident at once either way.",
        "- Transport: runner-host's ranks meet through shared memory on one host (its default; the pages of "
        "the segments a rank touches count in its RSS), the peers over Gloo's TCP (USE_LIBUV=0 where Debian's "
        "2.6 has no libuv: peer_common.py).",
        f"- Attention: runner-host 1.13 writes it out and keeps B x H x T x T scores and probabilities per block "
        f"for backward ({attention:.0f} MiB each here); runner-host 2.6 and the peers call "
        "scaled_dot_product_attention, which keeps none of them.",
        "- Data: runner-host reads char_lm batches of README.md through its loader (num_workers 1); the peers "
        "train on random tokens made before the loop (pytorch_gpt.py: one batch; AdamW lr 3e-4, not 1e-4: the "
        "same state).",
        "- The peers' own choices, their defaults: DDP bucket_cap_mb 25, gradient_as_bucket_view off; "
        "ZeroRedundancyOptimizer over that DDP; FSDP2 fully_shard on each block and the root (embeddings, "
        "norm, head), reshard_after_forward, with pytorch_fsdp2.py's three patches for 2.6 on the CPU."]
print("\n".join(out))
PY
