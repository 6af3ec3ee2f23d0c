#!/usr/bin/env bash
# The fsdp strategy against ddp on a gpt of ~50 M parameters, 2 ranks, in one
# run: per rank, the bytes held in parameters, gradients and optimizer state
# at their peak within a step, and peak RSS, beside 16Psi/N + (1 + prefetch)
# x the largest unit; step time of each sharding strategy / ddp's; and the
# share of all-gather time prefetching hides.
#
#   tools/bench/bench_fsdp.sh [iterations] [rounds]   (after tools/build.sh)
#
# With rounds > 1 every strategy runs once per round, the rounds one after
# the other (A B C ... A B C ...), and each step-time ratio is the median of
# the rounds' ratios, so the machine's drift between runs cancels out.
#
# Where the figures come from (all measured in this run):
#   parameters, gradients  the strategy's metrics of the last step:
#                          fsdp/param_bytes, fsdp/grad_bytes (what its
#                          tensors held at the step's peak, docs/fsdp.md),
#                          fsdp/gather_buffer_bytes (its all-gather buffers);
#                          ddp: the model's parameters (model.safetensors)
#                          and ddp/grad_bytes (its buckets)
#   optimizer state        the bytes of rank 0's optimizer state in the
#                          checkpoint written after the last step (fsdp's
#                          master values, `<name>.param`, count as parameters)
#   peak RSS               memory_mb of rank 0 (getrusage)
#   step time              the median of the `time` metric, first 2 steps left out
#   hidden all-gather      1 - fsdp/gather_wait_ms with prefetch 1 / the same
#                          with prefetch 0 (the wait prefetching removed),
#                          medians over the steps
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
ITERS="${1:-6}"
ROUNDS="${2:-1}"
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

echo "gpt vocab 256, block 64, dim 512, depth 16, heads 8; batch 2 x 64 tokens per rank; AdamW;"
echo "2 ranks on $(nproc --all) cores, OMP_NUM_THREADS=1, $ITERS iterations; $(date -u +%F) on $(uname -m)"
# hybrid_shard on 2 ranks is 2 "nodes" of 1 rank (local_world_size 1):
# shard groups of 1, replicated across: the degenerate case, for the row.
for round in $(seq 1 "$ROUNDS"); do
  run "ddp.$round" '{type: ddp}'
  run "full_shard.$round" '{type: fsdp, sharding_strategy: full_shard}'
  run "shard_grad_op.$round" '{type: fsdp, sharding_strategy: shard_grad_op}'
  run "no_shard.$round" '{type: fsdp, sharding_strategy: no_shard}'
  run "hybrid_shard.$round" '{type: fsdp, sharding_strategy: hybrid_shard, local_world_size: 1}'
  run "full_shard_noprefetch.$round" '{type: fsdp, sharding_strategy: full_shard, forward_prefetch: 0, backward_prefetch: 0}'
done

python3 - "$WORK" "$ROUNDS" <<'PY'
import json, os, struct, sys
work, rounds = sys.argv[1], int(sys.argv[2])

def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))

def tensor_bytes(path, keep=lambda k: True):
    return sum(v["data_offsets"][1] - v["data_offsets"][0]
               for k, v in header(path).items() if k != "__metadata__" and keep(k))

def lines(name):
    return [d for d in map(json.loads, open(os.path.join(work, name, "metrics.jsonl")))
            if d.get("mode") == "train"]

def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

names = ["ddp", "full_shard", "shard_grad_op", "no_shard", "hybrid_shard", "full_shard_noprefetch"]
rows = {}
times = {n: [] for n in names}  # per round
waits = {n: [] for n in names}
for r in range(1, rounds + 1):
    for name in names:
        ls = lines(f"{name}.{r}")
        times[name].append(median([x["time"] for x in ls[2:]]) * 1e3)
        waits[name].append(median([x.get("fsdp/gather_wait_ms", 0) for x in ls[2:]]))
for name in names:
    run_dir = f"{name}.1"
    ls = lines(run_dir)
    d = [x for x in os.listdir(os.path.join(work, run_dir)) if x.startswith("iter_")][0]
    ck = os.path.join(work, run_dir, d)
    model = tensor_bytes(os.path.join(ck, "model.safetensors"))
    opt_file = os.path.join(ck, "optimizer.safetensors" if name == "ddp" else "optimizer.rank0.safetensors")
    optim = tensor_bytes(opt_file, lambda k: not k.endswith(".param"))
    last = ls[-1]
    fsdp = name != "ddp"
    rows[name] = dict(
        params=last["fsdp/param_bytes"] if fsdp else model,
        buffers=last["fsdp/gather_buffer_bytes"] if fsdp else 0,
        grads=last["fsdp/grad_bytes"] if fsdp else last["ddp/grad_bytes"],
        optim=optim, rss=last["memory_mb"], model=model,
        units=max(x.get("fsdp/peak_gathered_units", 0) for x in ls),
        wait=median(waits[name]), time=median(times[name]),
        ratio=median([t / d for t, d in zip(times[name], times["ddp"])]))

psi = rows["ddp"]["model"] / 4  # fp32 parameters
N = 2
unit = 12 * 512 * 512 + 13 * 512  # one block's elements: the largest unit
prefetch = 1
sharded = 16 * psi / N + (1 + prefetch) * 4 * unit
formula = {"ddp": 16 * psi, "full_shard": sharded, "full_shard_noprefetch": 16 * psi / N + 4 * unit,
           "shard_grad_op": 4 * psi + 12 * psi / N, "no_shard": 16 * psi + 4 * psi,
           "hybrid_shard": 16 * psi + 4 * psi}  # shard groups of 1: as no_shard
MB = 1 / 2**20
print(f"parameters: {psi/1e6:.1f} M (fp32; Psi below), N = {N}, largest unit {unit/1e6:.2f} M elements;")
print("bytes per rank in MiB, measured; 'sum' = parameters + gradients + optimizer state, beside the formula")
print("| strategy | parameters | gather buffers | gradients | optimizer state | sum (formula) | peak RSS | most units whole | step ms | step / ddp |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for name, r in rows.items():
    total = r["params"] + r["grads"] + r["optim"]
    print(f"| {name} | {r['params']*MB:.0f} | {r['buffers']*MB:.0f} | {r['grads']*MB:.0f} | "
          f"{r['optim']*MB:.0f} | {total*MB:.0f} ({formula[name]*MB:.0f}) | {r['rss']:.0f} | "
          f"{r['units'] if name != 'ddp' else '-'} | {r['time']:.0f} | {r['ratio']:.3f} |")
print("formulas: ddp 16Psi; full_shard 16Psi/N + (1 + prefetch) x 4 x largest unit; shard_grad_op")
print("4Psi (every unit whole from forward to backward) + 12Psi/N; no_shard 16Psi + 4Psi (float32")
print("masters beside the parameters); hybrid_shard with local_world_size 1 shards over groups of")
print(f"1 rank (as no_shard). Step times: median over {rounds} round(s); step / ddp: median of the rounds' ratios")
w0, w1 = rows["full_shard_noprefetch"]["wait"], rows["full_shard"]["wait"]
if w0 > 0:
    print(f"all-gather wait per step: {w0:.1f} ms without prefetch, {w1:.1f} ms with prefetch 1: "
          f"{100 * (1 - w1 / w0):.0f}% of it hidden behind compute")
print(f"goals: full_shard / ddp {rows['full_shard']['ratio']:.3f} (<= 1.3), "
      f"shard_grad_op / ddp {rows['shard_grad_op']['ratio']:.3f} (<= 1.2)")
if rounds > 1:
    print("per round, full_shard / ddp: " + ", ".join(f"{t/d:.3f}" for t, d in zip(times["full_shard"], times["ddp"])) +
          "; shard_grad_op / ddp: " + ", ".join(f"{t/d:.3f}" for t, d in zip(times["shard_grad_op"], times["ddp"])))
PY
