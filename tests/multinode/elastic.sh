#!/usr/bin/env bash
# elastic.sh <runner-host> <kill-1|link-down-1>
#
# Issue 32, item 4: elastic restart across simulated hosts. A tiny gpt on 2
# hosts x 2 ranks (ddp, AdamW, --max-restarts 1 --min-nodes 1); host 1 is
# lost mid-training (all its processes SIGKILLed, or its link taken down).
# Host 0's launcher must restart its workers on 1 host x 2 ranks, resume
# from the newest valid checkpoint (4 -> 2 ranks, the global batch kept by
# accumulation), end after the same number of optimizer steps (max_iters),
# with a final loss within 2% of the uninterrupted run's (1 host x 4 ranks,
# the same global batch), and report the time to recover in its log and in
# metrics.jsonl. The cut-off host 1 (link-down-1) must end too, saying the
# store cannot be reached. Exit 77 (a skip) where namespaces cannot be made.
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 case=$2
# shellcheck source=tests/multinode/common.sh
source "$here/common.sh" "elastic-$case"
readme=$(cd "$here/../.." && pwd)/README.md
cat > "$tmp/job.yaml" <<YAML
seed: 0
model: {type: gpt, vocab_size: 256, block_size: 32, dim: 64, depth: 2, heads: 4}
data:
  train: {dataset: {type: char_lm, path: $readme, block_size: 32, split: train}, batch_size: 8,
          shuffle: true, num_workers: 0}
optim_wrapper:
  optimizer: {type: AdamW, lr: 0.002, weight_decay: 0.1}
  clip_grad: {max_norm: 1.0}
train_cfg: {by_epoch: false, max_iters: 150}
strategy: {type: ddp}
hooks: [{type: checkpoint, by_epoch: false, interval: 10, max_keep_ckpts: 2}, {type: metrics}]
dist: {timeout_s: 10}
YAML
export OMP_NUM_THREADS=1
"$sim" up "$set_name" 2
master=$("$sim" addr "$set_name" 0)
for i in 0 1; do
  "$sim" exec "$set_name" "$i" env OMP_NUM_THREADS=1 "$bin" --config "$tmp/job.yaml" --nnodes 2 \
    --node-rank "$i" --nproc-per-node 2 --master-addr "$master" --master-port 29500 \
    --max-restarts 1 --min-nodes 1 --set work_dir="$tmp/work" >"$tmp/host$i.log" 2>&1 &
  pids[$i]=$!
done
for _ in $(seq 3000); do [[ -f "$tmp/work/iter_30/meta.json" ]] && break; sleep 0.01; done
[[ -f "$tmp/work/iter_30/meta.json" ]] || fail "no checkpoint at iteration 30 after 30 s" "$tmp/host0.log"
case "$case" in
  kill-1) "$sim" kill "$set_name" 1 ;;
  link-down-1) "$sim" link "$set_name" 1 down ;;
  *) fail "unknown case '$case'" ;;
esac
rc=0
wait "${pids[0]}" || rc=$?
log="$tmp/host0.log"
[[ $rc == 0 ]] || fail "host 0 exited $rc after losing host 1 (--min-nodes 1)" "$log"
grep -q "restart 1 of 1: nodes 0 (were 0, 1), 2 rank(s)" "$log" || fail "host 0 did not restart alone" "$log"
grep -q "is kept by accumulation: each rank takes 2 micro-batches of 8 per iteration" "$log" ||
  fail "the global batch was not kept by accumulation" "$log"
from=$(grep -o "resuming from the newest valid checkpoint, [^ ]*" "$log" | sed 's/.*, //')
[[ -n "$from" ]] || fail "the restart did not resume from a checkpoint" "$log"
[[ -f "$tmp/work/iter_150/model.safetensors" ]] || fail "no checkpoint at max_iters (150)" "$log"
recover=$(grep -o '"time_to_recover_s": [0-9.e+-]*' "$tmp/work/metrics.jsonl" | head -1 | cut -d' ' -f2)
[[ -n "$recover" ]] || fail "no time_to_recover_s in metrics.jsonl" "$log"
if [[ "$case" == link-down-1 ]]; then
  wait "${pids[1]}" && fail "host 1, cut off, exited 0" "$tmp/host1.log"
  grep -q "elastic rendezvous: cannot .* does not answer: node 0, whose launcher holds it, is lost" "$tmp/host1.log" ||
    fail "host 1 does not say the store cannot be reached" "$tmp/host1.log"
fi
last_loss() { tail -1 "$1" | grep -o '"loss": [0-9.e+-]*' | cut -d' ' -f2; }
last_iter() { tail -1 "$1" | grep -o '"iter": [0-9]*' | cut -d' ' -f2; }
[[ "$(last_iter "$tmp/work/metrics.jsonl")" == 150 ]] || fail "the elastic run's last step is not 150" "$log"

"$bin" --config "$tmp/job.yaml" --nproc-per-node 4 --set work_dir="$tmp/whole" >"$tmp/whole.log" 2>&1 ||
  fail "the uninterrupted run (1 host x 4 ranks) failed" "$tmp/whole.log"
a=$(last_loss "$tmp/work/metrics.jsonl") b=$(last_loss "$tmp/whole/metrics.jsonl")
rel=$(python3 -c "print(f'{abs($a - $b) / abs($b):.2e}')")
# A training-quality threshold, not a rounding bound (AdamW over 150 steps
# summed in another order: no useful bound exists): measured 6.8e-7
# (docs/distributed.md), 2% leaves 29000x. The parameters: --rel 1, an
# effect-size bound (Adam amplifies the rounding noise to ~0.5% there); the
# key third of each qkv bias apart, reported only (compare_safetensors.py:
# rounding noise alone moves it, up to lr per step: it measured 1.1x its
# largest value once, under load).
python3 -c "import sys; sys.exit(0 if abs($a - $b) <= 0.02 * abs($b) else 1)" ||
  fail "final loss $a after the restart, $b uninterrupted: more than 2% apart" "$log"
params=$(python3 "$here/../common/compare_safetensors.py" "$tmp/work/iter_150/model.safetensors" \
  "$tmp/whole/iter_150/model.safetensors" --rel 1 --key-bias-apart --what parameters |
  sed 's/.*max rel diff //')
echo "ok   $case: host 0 went on alone from $(basename "$from"), recovered in $recover s; final loss $a vs $b uninterrupted (rel $rel), parameters within $params"
