#!/usr/bin/env bash
# The zero strategy against ddp on a gpt of ~50 M parameters, 2 ranks, in one
# run: per rank, the bytes held in parameters, gradients and optimizer state
# at their peak within a step, and peak RSS, beside the ZeRO paper's
# formulas; step time of each stage / ddp's; and stage 1 against PyTorch's
# own ZeroRedundancyOptimizer + DDP (Debian's python3-torch, Gloo) on the
# same model shape, per-rank batch, optimizer and threads.
#
#   tools/bench/bench_zero.sh [iterations]       (after tools/build.sh)
#
# Where the figures come from (all measured in this run):
#   parameters, gradients  the strategy's metrics of the last step:
#                          zero/param_bytes, zero/grad_bytes (what its
#                          tensors held at the step's peak, docs/zero.md),
#                          zero/gather_buffer_bytes (its all-gather buffers);
#                          ddp: the model's parameters (model.safetensors)
#                          and ddp/grad_bytes (its buckets)
#   optimizer state        the bytes of rank 0's optimizer state in the
#                          checkpoint written after the last step (the
#                          state tensors the optimizer holds; zero's master
#                          values, `<name>.param`, are counted as parameters)
#   peak RSS               memory_mb of rank 0 (getrusage)
#   step time              the median of the `time` metric, first 2 steps left out
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
ITERS="${1:-6}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1  # 2 ranks on 2 cores

cat > "$WORK/job.yaml" <<YAML
seed: 0
model: {type: gpt, vocab_size: 256, block_size: 64, dim: 512, depth: 16, heads: 8}
data:
  train: {dataset: {type: char_lm, path: $ROOT/README.md, block_size: 64, split: train},
          batch_size: 2, shuffle: true, num_workers: 1}
optim_wrapper: {optimizer: {type: AdamW, lr: 0.0001, weight_decay: 0.1}}
train_cfg: {by_epoch: false, max_iters: $ITERS}
hooks:
  - {type: metrics}
  - {type: checkpoint, by_epoch: false, interval: $ITERS}
YAML

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() {  # $1 = name, $2 = strategy
  "$BUILD/bin/runner-host" --config "$WORK/job.yaml" --nproc-per-node 2 --master-port "$(port)" \
    --set work_dir="$WORK/$1" --set "strategy=$2" > "$WORK/$1.log" 2>&1 ||
    { cat "$WORK/$1.log"; exit 1; }
}

# Groups of 2 M elements (DeepSpeed's default of 5e8 would make this whole
# model one group: one reduce-scatter after backward, no overlap); stage 3
# prefetches one block (3.15 M elements) ahead.
# overlap_comm on for every stage (DeepSpeed's default is off below stage 3).
BUCKETS="reduce_bucket_size: ${RH_BENCH_BUCKET:-2000000}, allgather_bucket_size: ${RH_BENCH_BUCKET:-2000000}, overlap_comm: true"
STAGE3="{type: zero, zero_optimization: {stage: 3, $BUCKETS, stage3_prefetch_bucket_size: 3200000}}"
echo "gpt vocab 256, block 64, dim 512, depth 16, heads 8; batch 2 x 64 tokens per rank; AdamW;"
echo "2 ranks on $(nproc --all) cores, OMP_NUM_THREADS=1, $ITERS iterations; $(date -u +%F) on $(uname -m)"
run ddp '{type: ddp}'
run zero1 "{type: zero, zero_optimization: {stage: 1, $BUCKETS}}"
run zero2 "{type: zero, zero_optimization: {stage: 2, $BUCKETS}}"
run zero3 "$STAGE3"
run zero3_noprefetch "{type: zero, zero_optimization: {stage: 3, $BUCKETS, stage3_prefetch_bucket_size: 0}}"
PEER="$(/usr/bin/python3 "$ROOT/tools/bench/pytorch_zero.py" --port "$(port)" --iters $((ITERS - 2)) \
  2> "$WORK/peer.log" | sed -n 's/pytorch zero1: \([0-9.]*\) ms\/iteration, peak rss \([0-9]*\) MB/\1 \2/p')" ||
  { echo "PyTorch peer failed (python3-torch installed?):"; tail -5 "$WORK/peer.log"; }

python3 - "$WORK" "$PEER" <<'PY'
import json, os, struct, sys
work, peer = sys.argv[1], sys.argv[2].split()

def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))

def tensor_bytes(path, keep=lambda k: True):
    return sum(v["data_offsets"][1] - v["data_offsets"][0]
               for k, v in header(path).items() if k != "__metadata__" and keep(k))

def lines(name):
    out = []
    for l in open(os.path.join(work, name, "metrics.jsonl")):
        d = json.loads(l)
        if d.get("mode") == "train":
            out.append(d)
    return out

def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]

ckpts = {}
rows = {}
for name in ["ddp", "zero1", "zero2", "zero3", "zero3_noprefetch"]:
    ls = lines(name)
    d = [x for x in os.listdir(os.path.join(work, name)) if x.startswith("iter_")][0]
    ck = os.path.join(work, name, d)
    model = tensor_bytes(os.path.join(ck, "model.safetensors"))
    opt_file = os.path.join(ck, "optimizer.safetensors" if name == "ddp" else "optimizer.rank0.safetensors")
    optim = tensor_bytes(opt_file, lambda k: not k.endswith(".param"))
    last = ls[-1]
    params = model if name == "ddp" else last["zero/param_bytes"]
    buffers = 0 if name == "ddp" else last["zero/gather_buffer_bytes"]
    grads = last["ddp/grad_bytes"] if name == "ddp" else last["zero/grad_bytes"]
    rows[name] = dict(params=params, buffers=buffers, grads=grads, optim=optim, rss=last["memory_mb"],
                      time=median([x["time"] for x in ls[2:]]) * 1e3, model=model)

psi = rows["ddp"]["model"] / 4  # fp32 parameters
N = 2
unit = 12 * 512 * 512 + 13 * 512  # one block's elements
formula = {
    "ddp":   (4 * psi, 4 * psi, 8 * psi),
    "zero1": (4 * psi + 4 * psi / N, 4 * psi, 8 * psi / N),
    "zero2": (4 * psi + 4 * psi / N, 4 * psi / N, 8 * psi / N),
    "zero3": (4 * psi / N + 2 * 4 * unit, 4 * psi / N, 8 * psi / N),
}
formula["zero3_noprefetch"] = formula["zero3"]
MB = 1 / 2**20
print(f"parameters: {psi/1e6:.1f} M (fp32; Psi below), N = {N}; bytes per rank in MiB, measured (formula)")
print("| strategy | parameters | gather buffers | gradients | optimizer state | peak RSS | step ms | step / ddp |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for name, r in rows.items():
    f = formula[name]
    print(f"| {name} | {r['params']*MB:.0f} ({f[0]*MB:.0f}) | {r['buffers']*MB:.0f} | "
          f"{r['grads']*MB:.0f} ({f[1]*MB:.0f}) | "
          f"{r['optim']*MB:.0f} ({f[2]*MB:.0f}) | {r['rss']:.0f} | {r['time']:.0f} | "
          f"{r['time']/rows['ddp']['time']:.3f} |")
print("formulas: ddp 4Psi + 4Psi + 8Psi; stage 1 masters 4Psi/N beside the parameters, AdamW 8Psi/N;")
print("stages 2 and 3 gradients 4Psi/N (plus the group buffers in flight); stage 3 parameters")
print("4Psi/N (masters) + two units whole (the small persistent ones beside)")
print(f"optimizer state / (ddp's / N): " +
      ", ".join(f"{n} {rows[n]['optim']/(rows['ddp']['optim']/N):.3f}" for n in list(rows)[1:]))
if len(peer) == 2:
    pt = float(peer[0])
    print(f"PyTorch ZeroRedundancyOptimizer + DDP: {pt:.0f} ms/step, peak RSS {peer[1]} MB; "
          f"runner-host stage 1 / PyTorch: {rows['zero1']['time']/pt:.3f}")
else:
    print("PyTorch peer did not run")
PY
