#!/usr/bin/env bash
# runner-host ddp against PyTorch's DistributedDataParallel (Debian's
# python3-torch, Gloo), 2 ranks each, same MLP, per-rank batch, optimizer,
# bucket cap and threads, in one run; then a bucket-size sweep.
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

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

runner() {  # $1 = bucket_cap_mb
  "$BUILD/bin/runner-host" --config "$WORK/job.yaml" --nproc-per-node 2 --master-port "$(port)" \
    --set work_dir="$WORK/w" --set strategy.bucket_cap_mb="$1" 2>&1 |
    sed -n 's/.*train loop: .*(\([0-9.]*\) ms\/iteration.*/\1/p' | head -1
}
pytorch() {  # $1 = bucket_cap_mb
  /usr/bin/python3 "$ROOT/tools/bench/pytorch_ddp.py" --port "$(port)" --iters "$ITERS" --bucket-cap-mb "$1" 2>/dev/null |
    sed -n 's/pytorch ddp: \([0-9.]*\) ms\/iteration/\1/p'
}

echo "MLP 256-1024-1024-10 (1.3 M parameters), batch 64 per rank, 2 ranks, Gloo, $ITERS iterations, OMP_NUM_THREADS=1"
ours=$(runner 25); theirs=$(pytorch 25)
printf "runner-host ddp      : %s ms/iteration\n" "$ours"
printf "PyTorch DDP (python) : %s ms/iteration\n" "$theirs"
printf "ratio runner-host / PyTorch: %s\n" "$(python3 -c "print(f'{$ours/$theirs:.3f}')")"
echo "bucket_cap_mb sweep (runner-host ddp):"
for cap in 0.25 1 5 25 100; do
  printf "  %6s MB: %s ms/iteration\n" "$cap" "$(runner "$cap")"
done
