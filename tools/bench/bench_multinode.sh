#!/usr/bin/env bash
# runner-host ddp against PyTorch's DistributedDataParallel (Debian's
# python3-torch, Gloo) across 2 simulated hosts (tests/multinode/simhosts.sh:
# a network namespace each, joined by veth links), 1 rank per host, the same
# MLP, per-rank batch, optimizer and bucket cap, in one run: the TCP path
# between machines. The links can be rate-limited (tc tbf) to show what the
# buckets' overlap buys when the network is the bottleneck. Needs root.
#
#   tools/bench/bench_multinode.sh [iterations]    (after tools/build.sh)
#   RH_BENCH_RATES="0 10000 1000"                  Mbit/s per link, 0: unlimited
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
SIM="$ROOT/tests/multinode/simhosts.sh"
ITERS="${1:-200}"
WORK="$(mktemp -d)"
SET="bench$$"
trap '"$SIM" down "$SET" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
export OMP_NUM_THREADS=1   # 2 ranks on 2 cores
why=$("$SIM" check) || { echo "bench_multinode.sh: $why" >&2; exit 2; }
/usr/bin/python3 -c 'import torch' 2> /dev/null ||
  { echo "bench_multinode.sh: the peer needs Python's torch: apt-get install python3-torch" >&2; exit 2; }

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
dist: {timeout_s: 120}
YAML

runner() {
  local master; master=$("$SIM" addr "$SET" 0)
  "$SIM" exec "$SET" 1 "$BUILD/bin/runner-host" --config "$WORK/job.yaml" --nnodes 2 --node-rank 1 \
    --nproc-per-node 1 --master-addr "$master" --master-port 29500 --set work_dir="$WORK/w1" \
    >"$WORK/r1.log" 2>&1 &
  local other=$!
  "$SIM" exec "$SET" 0 "$BUILD/bin/runner-host" --config "$WORK/job.yaml" --nnodes 2 --node-rank 0 \
    --nproc-per-node 1 --master-addr "$master" --master-port 29500 --set work_dir="$WORK/w0" 2>&1 |
    sed -n 's/.*train loop: .*(\([0-9.]*\) ms\/iteration.*/\1/p' | head -1
  wait "$other"
}
pytorch() {
  local master; master=$("$SIM" addr "$SET" 0)
  "$SIM" exec "$SET" 1 env GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 "$ROOT/tools/bench/pytorch_ddp.py" \
    --rank 1 --master-addr "$master" --port 29600 --iters "$ITERS" >/dev/null 2>&1 &
  local other=$!
  "$SIM" exec "$SET" 0 env GLOO_SOCKET_IFNAME=eth0 /usr/bin/python3 "$ROOT/tools/bench/pytorch_ddp.py" \
    --rank 0 --master-addr "$master" --port 29600 --iters "$ITERS" 2>/dev/null |
    sed -n 's/pytorch ddp: \([0-9.]*\) ms\/iteration/\1/p'
  wait "$other"
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ratio() { python3 -c "print(f'{$1/$2:.3f}')"; }

ROUNDS="${RH_BENCH_ROUNDS:-3}"
echo "MLP 256-1024-1024-10 (1.3 M parameters, 5.3 MB of gradients), batch 64 per rank,"
echo "2 simulated hosts x 1 rank, Gloo over TCP, $ITERS iterations, OMP_NUM_THREADS=1; median of $ROUNDS rounds"
for rate in ${RH_BENCH_RATES:-0 10000 1000}; do
  if [[ "$rate" == 0 ]]; then "$SIM" up "$SET" 2; label="unlimited"; else "$SIM" up "$SET" 2 "$rate"; label="$rate Mbit/s"; fi
  mine=(); theirs=()
  for ((i = 0; i < ROUNDS; i++)); do mine+=("$(runner)"); theirs+=("$(pytorch)"); done
  m=$(median "${mine[@]}"); p=$(median "${theirs[@]}")
  printf "link %-12s runner-host ddp %8s ms/it (runs: %s)  PyTorch DDP %8s ms/it (runs: %s)  ratio %s\n" \
    "$label" "$m" "${mine[*]}" "$p" "${theirs[*]}" "$(ratio "$m" "$p")"
  "$SIM" down "$SET"
done
