#!/usr/bin/env bash
# host_loss.sh <runner-host> <kill-1|link-down-1|kill-0>
#
# Issue 32: a host lost mid-training, on 2 simulated hosts x 2 ranks (ddp,
# dist.timeout_s 10): all of host 1's processes SIGKILLed (kill-1), host 1's
# link taken down (link-down-1: the peers see nothing, only silence), or
# host 0, which holds the rendezvous store, SIGKILLed (kill-0). The job on
# the surviving host must end non-zero within dist.timeout_s + 10 s with a
# message naming the lost host and its ranks (the heartbeat of
# host/comm/Heartbeat.hpp), leave no process there, and the last
# checkpoint must stay intact (`runner-host ckpt inspect` accepts it).
# Exit 77 (a skip, with the reason) where namespaces cannot be made.
bin=$1 case=$2
# shellcheck source=tests/multinode/common.sh
source "$(cd "$(dirname "$0")" && pwd)/common.sh" "hostloss-$case"
write_job "$tmp/job.yaml" "train_cfg: {by_epoch: false, max_iters: 100000000}
strategy: {type: ddp}
hooks: [{type: checkpoint, by_epoch: false, interval: 20, max_keep_ckpts: 2}]
dist: {timeout_s: 10}"

"$sim" up "$set_name" 2
master=$("$sim" addr "$set_name" 0)
for i in 0 1; do
  "$sim" exec "$set_name" "$i" "$bin" --config "$tmp/job.yaml" --nnodes 2 --node-rank "$i" \
    --nproc-per-node 2 --master-addr "$master" --master-port 29500 \
    --set work_dir="$tmp/work" >"$tmp/host$i.log" 2>&1 &
  pids[$i]=$!
done
# Until a checkpoint exists and training goes on.
for _ in $(seq 300); do [[ -f "$tmp/work/iter_40/meta.json" ]] && break; sleep 0.1; done
[[ -f "$tmp/work/iter_40/meta.json" ]] || fail "no checkpoint at iteration 40 after 30 s" "$tmp/host0.log"

case "$case" in
  kill-1) lost=1 survivor=0; "$sim" kill "$set_name" 1 ;;
  link-down-1) lost=1 survivor=0; "$sim" link "$set_name" 1 down ;;
  kill-0) lost=0 survivor=1; "$sim" kill "$set_name" 0 ;;
  *) fail "unknown case '$case'" ;;
esac
start=$(date +%s.%N)
rc=0
wait "${pids[$survivor]}" || rc=$?
took=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
log="$tmp/host$survivor.log"
[[ $rc != 0 ]] || fail "host $survivor's job exited 0 after host $lost was lost" "$log"
python3 -c "import sys; sys.exit(0 if $took <= 20 else 1)" ||
  fail "host $survivor's job took $took s to end (dist.timeout_s 10 + 10)" "$log"
lost_host="sim-$set_name-h$lost"
if [[ "$case" == kill-0 ]]; then
  grep -q "cannot be reached: lost host $lost_host (rank 0's, which holds the store; its ranks 0, 1)" "$log" ||
    fail "the message does not name host 0 and its ranks as lost" "$log"
else
  grep -q "lost host $lost_host: its ranks 2, 3 stopped" "$log" ||
    fail "the message does not name host 1 and its ranks as lost" "$log"
fi
left=$("$sim" pids "$set_name" "$survivor")
[[ -z "$left" ]] || fail "processes left on host $survivor: $left" "$log"
# The last checkpoint is whole (host 0 wrote it; the file system is shared).
ckpt=$(ls -d "$tmp"/work/iter_* | sort -t_ -k2 -n | tail -1)
"$bin" ckpt inspect "$ckpt" >"$tmp/inspect.log" 2>&1 || fail "the last checkpoint $ckpt is not intact" "$tmp/inspect.log"
echo "ok   $case: host $survivor's job ended in $took s naming the lost host; no process left; $(basename "$ckpt") intact"
