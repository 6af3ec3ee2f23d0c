#!/usr/bin/env bash
# zero1_out_of_tree.sh <build_dir> <source_dir>
#
# docs/writing-a-strategy.md's second example (examples/strategy_zero1: the
# optimizer state sharded through OptimizerParams), built against the
# *installed* SDK alone and trained on 3 ranks with AdamW and clip_grad.
# It must train like ddp (the same parameters, bit for bit: it averages
# with RH_REDUCE_AVG, which divides each rank's gradient by the world size
# and sums in rank order as ddp does on shared memory, clip_grad's norm is
# summed exactly whatever each owner holds (rh/cpp/torch_exact_norm.hpp),
# and AdamW is elementwise), hold its optimizer state in shards (each
# optimizer.rank<r> smaller than ddp's whole optimizer file), and its
# checkpoint must resume under ddp on 2 ranks.
# shellcheck source=tests/sdk/out_of_tree.sh
source "$(dirname "$0")/out_of_tree.sh" "$1" "$2" strategy_zero1 librh_strategy_zero1.so
cat > "$tmp/job.yaml" <<YAML
seed: 5
model: {type: mlp, in_features: 16, hidden: [32, 32], num_classes: 4}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 480, num_features: 16, num_classes: 4},
          batch_size: 8, shuffle: true, num_workers: 0}
optim_wrapper: {optimizer: {type: AdamW, lr: 0.01, weight_decay: 0.01}, clip_grad: {max_norm: 0.5}}
train_cfg: {by_epoch: false, max_iters: 20}
hooks: [{type: checkpoint, by_epoch: false, interval: 20}]
dist: {timeout_s: 30}
YAML
"$host" --config "$tmp/job.yaml" --nproc-per-node 3 --master-port "$(port)" --set work_dir="$tmp/zero1" \
  --set "strategy={type: zero1, plugin: $plugin}" >"$tmp/zero1.log" 2>&1 ||
  fail "training with the out-of-tree zero1 strategy" "$tmp/zero1.log"
grep -q "strategy zero1" "$tmp/zero1.log" || fail "zero1 was not the strategy" "$tmp/zero1.log"
"$host" --config "$tmp/job.yaml" --nproc-per-node 3 --master-port "$(port)" --set work_dir="$tmp/ddp" \
  --set "strategy={type: ddp}" >"$tmp/ddp.log" 2>&1 || fail "training with ddp" "$tmp/ddp.log"

whole=$(stat -c %s "$tmp/ddp/iter_20/optimizer.safetensors")
for r in 0 1 2; do
  f="$tmp/zero1/iter_20/optimizer.rank$r.safetensors"
  [[ -f "$f" ]] || fail "no $f: the optimizer state is not sharded"
  (( $(stat -c %s "$f") < whole )) || fail "optimizer.rank$r ($(stat -c %s "$f") B) is not smaller than ddp's whole state ($whole B)"
done

python3 "$source_dir/tests/common/compare_safetensors.py" "$tmp/zero1/iter_20/model.safetensors" \
  "$tmp/ddp/iter_20/model.safetensors" --rel 0 --what "zero1 matches ddp on 3 ranks, bit for bit"

# Its sharded checkpoint resumes under ddp on 2 ranks (3 -> 2).
"$host" --config "$tmp/job.yaml" --nproc-per-node 2 --master-port "$(port)" --set work_dir="$tmp/zero1" \
  --set "strategy={type: ddp}" --set resume=auto --set train_cfg.max_iters=24 >"$tmp/resume.log" 2>&1 ||
  fail "resuming zero1's checkpoint under ddp on 2 ranks" "$tmp/resume.log"
grep -q "resumed from" "$tmp/resume.log" || fail "the run did not resume" "$tmp/resume.log"
echo "ok   zero1's checkpoint (3 ranks) resumes under ddp on 2"
