#!/usr/bin/env bash
# runner-host ddp against PyTorch's DistributedDataParallel (Debian's
# python3-torch, Gloo), 2 ranks each, same MLP, per-rank batch, optimizer,
# bucket cap and threads, in one run; runner-host both through shared memory
# (its default on one host) and over TCP (what PyTorch's Gloo uses); then a
# bucket-size sweep.
#
#   tools/bench/bench_ddp.sh [iterations]       (after tools/build.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
ITERS="${1:-200}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1   # 2 ranks on 2 cores

cat > "$WORK/job.yaml" <<YAML
seed: 0
model: {type: mlp, in_features: 256, hidden: [1024, 1024], num_classes: 10}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 65536, num_features: 256, num_classes: 10},
          batch_size: 64, shuffle: true, num_workers: 1}
optim_wrapper: {optimizer: {type: SGD, lr: 0.05, momentum: 0.9}}
train_cfg: {by_epoch: false, max_iters: $ITERS}
strategy: {type: ddp, bucket_cap_mb: 25}
hooks: []
YAML

/usr/bin/python3 -c 'import torch' 2> /dev/null ||
  { echo "bench_ddp.sh: the peer needs Python's torch: apt-get install python3-torch" >&2; exit 2; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

runner() {  # $1 = bucket_cap_mb, $2 = dist.shared_memory
  "$BUILD/bin/runner-host" --config "$WORK/job.yaml" --nproc-per-node 2 --master-port "$(port)" \
    --set work_dir="$WORK/w" --set strategy.bucket_cap_mb="$1" --set dist.shared_memory="$2" 2>&1 |
    sed -n 's/.*train loop: .*(\([0-9.]*\) ms\/iteration.*/\1/p' | head -1
}
pytorch() {  # $1 = bucket_cap_mb
  /usr/bin/python3 "$ROOT/tools/bench/pytorch_ddp.py" --port "$(port)" --iters "$ITERS" --bucket-cap-mb "$1" 2>/dev/null |
    sed -n 's/pytorch ddp: \([0-9.]*\) ms\/iteration/\1/p'
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

ROUNDS="${RH_BENCH_ROUNDS:-3}"
echo "MLP 256-1024-1024-10 (1.3 M parameters), batch 64 per rank, 2 ranks, Gloo, $ITERS iterations, OMP_NUM_THREADS=1"
echo "median of $ROUNDS rounds, the three runs of a round back to back (this machine is noisy)"
shm=(); tcp=(); theirs=()
for ((i = 0; i < ROUNDS; i++)); do
  shm+=("$(runner 25 true)"); tcp+=("$(runner 25 false)"); theirs+=("$(pytorch 25)")
done
s=$(median "${shm[@]}"); t=$(median "${tcp[@]}"); p=$(median "${theirs[@]}")
printf "runner-host ddp, shared memory : %s ms/iteration  (runs: %s)\n" "$s" "${shm[*]}"
printf "runner-host ddp, TCP ring      : %s ms/iteration  (runs: %s)\n" "$t" "${tcp[*]}"
printf "PyTorch DDP (python, Gloo TCP) : %s ms/iteration  (runs: %s)\n" "$p" "${theirs[*]}"
printf "ratio runner-host / PyTorch: %s (shared memory, the default on one host), %s (TCP, as PyTorch)\n" \
  "$(ratio "$s" "$p")" "$(ratio "$t" "$p")"
echo "bucket_cap_mb sweep (runner-host ddp, shared memory, one run each):"
for cap in ${RH_BENCH_SWEEP:-0.25 1 5 25 100}; do
  printf "  %6s MB: %s ms/iteration\n" "$cap" "$(runner "$cap" true)"
done
