#!/usr/bin/env bash
# runner-host on LibTorch 1.13 and on LibTorch 2.6 against PyTorch 2.6's own
# training in one run (issue 38): Debian 12's runner-host (build/) here, and
# in the Debian 13 chroot (tools/torch2_chroot.sh) runner-host built against
# its LibTorch 2.6 (build-torch26/) and the PyTorch 2.6 peers (python3-torch
# 2.6, Gloo), each job as the 1.13 benchmarks run it:
#   single  the gpt of bench_zero.sh (vocab 256, T 64, dim 512, 16 blocks,
#           8 heads: 50.7 M parameters), batch 2, AdamW, one process;
#           peer: pytorch_gpt.py (eager, --device cpu)
#   ddp     bench_ddp.sh's MLP 256-1024-1024-10, batch 64 per rank, SGD
#           momentum, bucket_cap_mb 25, 2 ranks; runner-host through shared
#           memory (its default on one host) and over TCP (ddp_tcp, as Gloo);
#           peer: pytorch_ddp.py (DistributedDataParallel)
#   zero1   the gpt, 2 ranks, zero stage 1 with bench_zero.sh's buckets;
#           peer: pytorch_zero.py (ZeroRedundancyOptimizer over DDP)
#   fsdp    the gpt, 2 ranks, fsdp sharding_strategy full_shard (bench_fsdp.sh);
#           peer: pytorch_fsdp2.py (FSDP2 fully_shard per block + root, with
#           its three 2.6 patches; --check-against-ddp shows it equals DDP)
# OMP_NUM_THREADS=1 everywhere (2 ranks on 2 cores; the single run too).
#
#   tools/bench/bench_torch26.sh [iterations] [rounds]     (as root)
#   tools/bench/bench_torch26.sh --why-not [iterations]    why it cannot run here (nothing if it can)
#     iterations  of each gpt job (default 12; the first 2 left out)
#     rounds      each job once per round, the rounds one after the other;
#                 figures: the median over rounds of each ms/step and of
#                 each round's ratio (default 1)
#
# Figures: ms/step is the median step, first steps left out: runner-host's
# `time` metric (metrics hook; the batch's load and the step, not the hooks),
# each peer's own per-step median (pytorch_gpt.py median_ms, pytorch_ddp.py
# `median`, pytorch_zero.py, pytorch_fsdp2.py). The ddp jobs run
# RH_BENCH_DDP_ITERS iterations (default 25 x iterations), the first 20 left
# out. Peak RSS: the largest ru_maxrss among the processes of the run
# (getrusage(RUSAGE_CHILDREN) of a wrapper: the largest rank), MB. Ratios
# are runner-host / PyTorch 2.6 (< 1: runner-host faster).
#
# Needs: root (the chroot), tools/build.sh's build/ (RH_BUILD_DIR) and a
# LibTorch 2.6 build (RH_TORCH2_BUILD_DIR, default build-torch26/:
# tools/test.sh --torch2 makes it). One outside this checkout (another
# worktree's) is bound into the chroot at its own path for each 2.6 run (a
# private mount namespace; the empty mount point stays in the chroot's tree).
# RH_TORCH2_CHROOT: the chroot (as tools/torch2_chroot.sh). RH_BENCH_ROWS: a
# subset of "single ddp zero1 fsdp". RH_BENCH_KEEP=1 keeps the work folder
# (build-bench_torch26.*: every run's log, metrics and RSS).
#
# Nothing differs silently: the output lists what differs besides the
# runner (LibTorch, OpenBLAS and the kernels it picks on this CPU, the
# attention kernel, compilers, data). OPENBLAS_CORETYPE is left as the
# environment has it; RH_BENCH_CORETYPE_113=SkylakeX (say) sets it for the
# Debian 12 side only, and the output's first line labels the run a variant.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BENCH="$ROOT/tools/bench"
# shellcheck source=tools/bench/torch26_common.sh
source "$BENCH/torch26_common.sh"  # BUILD, BUILD26, CHROOT
WARM=2        # gpt steps left out
DDP_WARM=20   # MLP steps left out

gpt_job() { t26_gpt_job "$1" "$2" 64 512 16 2; }  # FILE ITERS

mlp_job() {  # FILE ITERS
  cat > "$1" <<YAML
seed: 0
model: {type: mlp, in_features: 256, hidden: [1024, 1024], num_classes: 10}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 65536, num_features: 256, num_classes: 10},
          batch_size: 64, shuffle: true, num_workers: 1}
optim_wrapper: {optimizer: {type: SGD, lr: 0.05, momentum: 0.9}}
train_cfg: {by_epoch: false, max_iters: $2}
strategy: {type: ddp, bucket_cap_mb: 25}
hooks: [{type: metrics}]
YAML
}

BUCKETS="reduce_bucket_size: 2000000, allgather_bucket_size: 2000000, overlap_comm: true"
# runner-host's arguments for a row (after --config).
rh_args() {  # ROW WORK_DIR
  case "$1" in
    single) echo "--set|work_dir=$2|--set|strategy={type: single}" ;;
    ddp) echo "--nproc-per-node|2|--set|work_dir=$2" ;;
    ddp_tcp) echo "--nproc-per-node|2|--set|work_dir=$2|--set|dist.shared_memory=false" ;;
    zero1) echo "--nproc-per-node|2|--set|work_dir=$2|--set|strategy={type: zero, zero_optimization: {stage: 1, $BUCKETS}}" ;;
    fsdp) echo "--nproc-per-node|2|--set|work_dir=$2|--set|strategy={type: fsdp, sharding_strategy: full_shard}" ;;
  esac
}

# PY OUT CMD...: runs CMD with its output in OUT.log, its processes' peak RSS
# (MB: RUSAGE_CHILDREN's ru_maxrss, the largest one) in OUT.rss.
WRAP='import resource, subprocess, sys
out = sys.argv[1]
with open(out + ".log", "w") as log:
    rc = subprocess.call(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT)
open(out + ".rss", "w").write("%.0f\n" % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
sys.exit(rc)'
measure() {  # PY OUT CMD...
  local py=$1 out=$2
  shift 2
  "$py" -c "$WRAP" "$out" "$@" || { echo "  FAILED: $(basename "$out") (log: $out.log):" >&2; tail -5 "$out.log" | sed 's/^/    /' >&2; }
}

# One row's runner-host run, on this side's build.
run_rh() {  # PY RUNNER_HOST ROW OUT_DIR ITERS DDP_ITERS TAG
  local py=$1 rh=$2 row=$3 dir=$4 iters=$5 ddp_iters=$6 tag=$7 cfg args port
  case "$row" in
    ddp*) cfg="$dir/mlp.$tag.yaml"; mlp_job "$cfg" "$ddp_iters" ;;
    *) cfg="$dir/gpt.$tag.yaml"; gpt_job "$cfg" "$iters" ;;
  esac
  IFS='|' read -r -a args <<< "$(rh_args "$row" "$dir/$tag.$row")"
  [[ $row == single ]] || { port=$("$py" -c "$FREE_PORT"); args+=(--master-port "$port"); }
  measure "$py" "$dir/$tag.$row" "$rh" --config "$cfg" "${args[@]}"
}
FREE_PORT='import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'

# One row's PyTorch peer (inside the chroot: python3 is Debian 13's, torch 2.6).
run_peer() {  # ROW OUT_DIR ITERS DDP_ITERS
  local row=$1 dir=$2 iters=$3 ddp_iters=$4 gpt=(--vocab 256 --block 64 --dim 512 --depth 16 --heads 8 --batch 2)
  case "$row" in
    single) measure python3 "$dir/peer.single" python3 "$BENCH/pytorch_gpt.py" --device cpu --mode sdpa \
      "${gpt[@]}" --warmup "$WARM" --steps $((iters - WARM)) ;;
    ddp) measure python3 "$dir/peer.ddp" python3 "$BENCH/pytorch_ddp.py" --port "$(python3 -c "$FREE_PORT")" \
      --iters $((ddp_iters - DDP_WARM)) --warmup "$DDP_WARM" --bucket-cap-mb 25 ;;
    zero1) measure python3 "$dir/peer.zero1" python3 "$BENCH/pytorch_zero.py" "${gpt[@]}" \
      --warmup "$WARM" --iters $((iters - WARM)) ;;
    fsdp) measure python3 "$dir/peer.fsdp" python3 "$BENCH/pytorch_fsdp2.py" "${gpt[@]}" \
      --warmup "$WARM" --iters $((iters - WARM)) ;;
  esac
}

# Inside the chroot: runner-host 2.6 and the peer of one row (ddp: both
# runner-host transports, one peer).
if [ "${1:-}" = --inside ]; then
  row=$2 dir=$3 iters=$4 ddp_iters=$5 build26=$6
  export OMP_NUM_THREADS=1
  if [ "$row" = ddp ]; then
    run_rh python3 "$build26/bin/runner-host" ddp "$dir" "$iters" "$ddp_iters" rh26
    run_rh python3 "$build26/bin/runner-host" ddp_tcp "$dir" "$iters" "$ddp_iters" rh26
  else
    run_rh python3 "$build26/bin/runner-host" "$row" "$dir" "$iters" "$ddp_iters" rh26
  fi
  run_peer "$row" "$dir" "$iters" "$ddp_iters"
  exit 0
fi

WHY_NOT=0
if [ "${1:-}" = --why-not ]; then WHY_NOT=1; shift; fi  # report.sh: print why it cannot run, if it cannot
ITERS="${1:-12}"
ROUNDS="${2:-1}"
DDP_ITERS="${RH_BENCH_DDP_ITERS:-$((25 * ITERS))}"
ROWS="${RH_BENCH_ROWS:-single ddp zero1 fsdp}"
export OMP_NUM_THREADS=1

# Why this cannot run here, if it cannot (report.sh prints the reason).
why_not() {
  local common
  common=$(t26_why_not)
  [ -z "$common" ] || { echo "$common"; return; }
  [[ $ITERS =~ ^[0-9]+$ ]] && ((ITERS > WARM)) || { echo "iterations: more than $WARM (the steps left out), not '$ITERS'"; return; }
  ((DDP_ITERS > DDP_WARM)) || { echo "RH_BENCH_DDP_ITERS: more than $DDP_WARM (the steps left out)"; return; }
}
t26_start bench_torch26 "$WHY_NOT"  # WORK

VARIANT=""
if [ -n "${RH_BENCH_CORETYPE_113:-}" ]; then
  VARIANT="OPENBLAS_CORETYPE=$RH_BENCH_CORETYPE_113 for the Debian 12 side (runner-host 1.13) only"
  echo "VARIANT: $VARIANT; not the machine's default kernels" >&2
fi
BLAS_PY='import ctypes, os
l = ctypes.CDLL("libblas.so.3")
for f in ("openblas_get_corename", "openblas_get_config"):
    getattr(l, f).restype = ctypes.c_char_p
print("%s, core %s (OPENBLAS_CORETYPE %s)" % (l.openblas_get_config().decode().split(" NO_")[0].split(" DYNAMIC")[0],
      l.openblas_get_corename().decode(), os.environ.get("OPENBLAS_CORETYPE", "unset")))'
INFO_SH='printf "%s|%s|%s|%s\n" "$(dpkg-query -W -f "\${Version}" libtorch-dev 2>/dev/null)" \
  "$(python3 -c "$1" 2>&1 | tail -1)" "$(c++ -dumpfullversion 2>/dev/null || echo ?)" \
  "$(python3 -c "import sys; print(sys.version.split()[0])")"'
if [ -n "${RH_BENCH_CORETYPE_113:-}" ]; then
  INFO113=$(OPENBLAS_CORETYPE=$RH_BENCH_CORETYPE_113 bash -c "$INFO_SH" bash "$BLAS_PY")
else
  INFO113=$(bash -c "$INFO_SH" bash "$BLAS_PY")
fi
INFO26=$(in_chroot bash -c "$INFO_SH" bash "$BLAS_PY" 2>&1 | tail -1)
TORCH26=$(in_chroot python3 -c 'import torch; print(torch.__version__)' 2>&1 | tail -1)

echo "runner-host 1.13 ($BUILD) and 2.6 ($BUILD26) against PyTorch $TORCH26; $ITERS gpt iterations" \
  "(first $WARM left out), $DDP_ITERS ddp iterations (first $DDP_WARM left out), $ROUNDS round(s);" \
  "OMP_NUM_THREADS=1; $(date -u '+%F %H:%M') UTC on $(nproc --all) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
START=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
  dir="$WORK/r$round"
  mkdir -p "$dir"
  for row in $ROWS; do
    echo "== round $round: $row ($((SECONDS - START)) s)" >&2
    # runner-host 1.13 here, then runner-host 2.6 and the peer in the chroot.
    if [ -n "${RH_BENCH_CORETYPE_113:-}" ]; then export OPENBLAS_CORETYPE="$RH_BENCH_CORETYPE_113"; fi
    run_rh /usr/bin/python3 "$BUILD/bin/runner-host" "$row" "$dir" "$ITERS" "$DDP_ITERS" rh113
    [ "$row" = ddp ] && run_rh /usr/bin/python3 "$BUILD/bin/runner-host" ddp_tcp "$dir" "$ITERS" "$DDP_ITERS" rh113
    if [ -n "${RH_BENCH_CORETYPE_113:-}" ]; then unset OPENBLAS_CORETYPE; fi
    in_chroot bash tools/bench/bench_torch26.sh --inside "$row" "$dir" "$ITERS" "$DDP_ITERS" "$BUILD26" \
      > "$dir/chroot.$row.log" 2>&1 || { echo "  the chroot run failed:" >&2; tail -5 "$dir/chroot.$row.log" >&2; }
    grep -h "FAILED" -A6 "$dir/chroot.$row.log" >&2 || true
  done
done
ELAPSED=$((SECONDS - START))

CMD="tools/bench/bench_torch26.sh $ITERS $ROUNDS"
[ -n "${RH_BENCH_DDP_ITERS:-}" ] && CMD="RH_BENCH_DDP_ITERS=$RH_BENCH_DDP_ITERS $CMD"
[ -n "${RH_BENCH_ROWS:-}" ] && CMD="RH_BENCH_ROWS='$RH_BENCH_ROWS' $CMD"
[ -n "${RH_TORCH2_BUILD_DIR:-}" ] && CMD="RH_TORCH2_BUILD_DIR=$RH_TORCH2_BUILD_DIR $CMD"
[ -n "${RH_BENCH_CORETYPE_113:-}" ] && CMD="RH_BENCH_CORETYPE_113=$RH_BENCH_CORETYPE_113 $CMD"
/usr/bin/python3 - "$WORK" "$ROUNDS" "$ROWS" "$WARM" "$DDP_WARM" "$INFO113" "$INFO26" "$TORCH26" \
  "$CMD" "$ELAPSED" "$VARIANT" "$ITERS" "$DDP_ITERS" <<'PY'
import json, os, re, statistics, sys
(work, rounds, rows, warm, ddp_warm, info113, info26, torch26, cmd, elapsed, variant,
 iters, ddp_iters) = sys.argv[1:]
rounds, warm, ddp_warm = int(rounds), int(warm), int(ddp_warm)
rows = rows.split()

def rss(path):
    try:
        return float(open(path + ".rss").read())
    except (OSError, ValueError):
        return None

def rh_ms(path, skip):
    """runner-host: the median `time` of rank 0's metrics after `skip` steps."""
    try:
        ts = [d["time"] for d in map(json.loads, open(os.path.join(path, "metrics.jsonl")))
              if d.get("mode") == "train"][skip:]
    except OSError:
        return None
    return 1e3 * statistics.median(ts) if ts else None

PEER = {"single": r"median_ms ([0-9.]+)", "ddp": r"pytorch ddp median: ([0-9.]+) ms/step",
        "zero1": r"pytorch zero1: ([0-9.]+) ms/iteration", "fsdp": r"pytorch fsdp2: ([0-9.]+) ms/iteration"}

def peer_ms(path, row):
    try:
        m = re.search(PEER[row], open(path + ".log").read())
    except OSError:
        return None
    return float(m.group(1)) if m else None

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None

lines = []  # (label, rows of figures)
table = []
for row in rows:
    variants = ["ddp", "ddp_tcp"] if row == "ddp" else [row]
    skip = ddp_warm if row == "ddp" else warm
    for v in variants:
        per = {"rh113": [], "rh26": [], "peer": [], "r113": [], "r26": [], "m113": [], "m26": [], "mpeer": []}
        for r in range(1, rounds + 1):
            d = os.path.join(work, f"r{r}")
            a, b = rh_ms(os.path.join(d, f"rh113.{v}"), skip), rh_ms(os.path.join(d, f"rh26.{v}"), skip)
            p = peer_ms(os.path.join(d, f"peer.{row}"), row)
            per["rh113"].append(a); per["rh26"].append(b); per["peer"].append(p)
            per["r113"].append(a / p if a and p else None); per["r26"].append(b / p if b and p else None)
            per["m113"].append(rss(os.path.join(d, f"rh113.{v}")))
            per["m26"].append(rss(os.path.join(d, f"rh26.{v}")))
            per["mpeer"].append(rss(os.path.join(d, f"peer.{row}")))
        table.append((v, {k: med(x) for k, x in per.items()}, per))

NAMES = {"single": "single (1 process): gpt 50.7 M, batch 2 / eager PyTorch",
         "ddp": "ddp (2 ranks): MLP 1.3 M, batch 64 / DDP; runner-host through shared memory",
         "ddp_tcp": "ddp (2 ranks): the same, runner-host over TCP (as Gloo)",
         "zero1": "zero stage 1 (2 ranks): gpt / ZeroRedundancyOptimizer + DDP",
         "fsdp": "fsdp full_shard (2 ranks): gpt / FSDP2 fully_shard (patched)"}
f = lambda x, fmt="{:.1f}": "-" if x is None else fmt.format(x)
out = []
if variant:
    out += [f"**Variant, not the default: {variant}.**", ""]
out += [f"    {cmd}", "",
        f"runner-host on LibTorch 1.13 (Debian 12) and on LibTorch 2.6 (Debian 13 chroot) against "
        f"PyTorch {torch26} in the same run, {elapsed} s; ms/step: median step ({iters} gpt iterations, "
        f"first {warm} left out; {ddp_iters} ddp iterations, first {ddp_warm} left out)"
        + (f", median over {rounds} rounds (ratios: median of the rounds' ratios)" if rounds > 1 else "")
        + "; peak RSS: the largest process of the run (a rank), MB; OMP_NUM_THREADS=1.", "",
        "| job | runner-host 1.13 ms | runner-host 2.6 ms | PyTorch 2.6 ms | 1.13 / PyTorch 2.6 | "
        "2.6 / PyTorch 2.6 | peak RSS 1.13 / 2.6 / PyTorch |",
        "|---|---:|---:|---:|---:|---:|---:|"]
for v, m, per in table:
    out.append(f"| {NAMES[v]} | {f(m['rh113'])} | {f(m['rh26'])} | {f(m['peer'])} | "
               f"{f(m['r113'], '{:.3f}')} | {f(m['r26'], '{:.3f}')} | "
               f"{f(m['m113'], '{:.0f}')} / {f(m['m26'], '{:.0f}')} / {f(m['mpeer'], '{:.0f}')} |")
if rounds > 1:
    out += ["", "per round, runner-host 2.6 / PyTorch 2.6: " + "; ".join(
        f"{v} " + ", ".join(f(x, "{:.3f}") for x in per["r26"]) for v, m, per in table)]
l113, b113, cc113, py113 = info113.split("|")
l26, b26, cc26, py26 = info26.split("|")
out += ["", "What differs besides the runner:",
        f"- LibTorch {l113} (Debian 12, GCC {cc113}) against {l26} (Debian 13, GCC {cc26}); "
        f"the peers run Debian 13's python3-torch {torch26} on Python {py26}.",
        f"- BLAS: Debian 12's {b113}; Debian 13's {b26}. An OpenBLAS older than the CPU falls back "
        "to older kernels (issue 38 measured 3.7x on matrix products here); runner-host 1.13 "
        "inherits Debian 12's choice unless OPENBLAS_CORETYPE (or the job's env_cfg.blas_coretype) "
        "says otherwise" + (f" -- this run: {variant}." if variant else "; this run leaves it as the machine has it."),
        "- Attention: runner-host 1.13 writes it out (matmul, causal mask, softmax, matmul); "
        "runner-host 2.6 and the PyTorch 2.6 peers call scaled_dot_product_attention (is_causal).",
        "- Data: runner-host reads char_lm batches of README.md / synthetic_classification through "
        "its loader (num_workers 1; the load is in `time`); the peers train on random tensors made "
        "before the loop. The zero and fsdp peers time each step after a barrier."]
per_row = {
    "ddp": "- ddp: runner-host's default on one host is shared memory; the TCP row is the like-for-like "
           "one against Gloo's TCP.",
    "zero1": "- zero1: runner-host's buckets of 2 M elements with overlap_comm (bench_zero.sh); PyTorch "
             "ZeroRedundancyOptimizer over DDP with 25 MB buckets.",
    "fsdp": "- fsdp: runner-host's units are the embedding, each block and the head, prefetch 1; the "
            "FSDP2 peer shards each block and the root (embeddings, norm, head; not resharded), and "
            "carries three patches for 2.6 on the CPU (pytorch_fsdp2.py: CPU stream events, the "
            "all-gather copy-out's version counter, Gloo's reduce-scatter summing where asked to "
            "average); patched it equals DDP bit for bit (pytorch_fsdp2.py --check-against-ddp)."}
out += [per_row[r] for r in rows if r in per_row]
if set(rows) - {"single"}:
    out += ["- The 2.6 peers' rendezvous uses the classic TCPStore (USE_LIBUV=0: Debian's 2.6 has no "
            "libuv); start-up is outside the step times."]
try:
    patches = [l.strip() for l in open(os.path.join(work, "r1", "peer.fsdp.log")) if l.startswith("patch ")]
except OSError:
    patches = []
if patches:
    out += ["- The FSDP2 peer said: " + "; ".join(patches) + "."]
print("\n".join(out))
PY
