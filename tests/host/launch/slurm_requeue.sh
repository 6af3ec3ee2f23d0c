#!/usr/bin/env bash
# slurm_requeue.sh <runner-host>
#
# Issue 32, item 4: the SLURM requeue flow of examples/slurm/train.sbatch,
# run as written with stand-ins for srun (one process per task, with the
# variables srun gives each: SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
# SLURM_STEP_NUM_TASKS, SLURM_STEP_TASKS_PER_NODE, SLURM_STEP_NODELIST;
# signals forwarded to the tasks, exit code the highest task's) and for
# scontrol (requeue recorded). SIGUSR1 (what --signal=USR1@N sends) reaches
# the 2 ranks mid-training: they save and exit 138, the script requeues the
# job; the job run again with SLURM_RESTART_COUNT=1 (the job file says no
# `resume`) resumes from the checkpoint the signal saved and ends with the
# bytes of an uninterrupted run.
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
# shellcheck source=tests/common/launch_helpers.sh
source "$here/../../common/launch_helpers.sh" "slurm"
script="$here/../../../examples/slurm/train.sbatch"
export OMP_NUM_THREADS=1
mkdir -p "$tmp/bin"
cat > "$tmp/bin/srun" <<'SH'
#!/usr/bin/env bash
# srun's stand-in: SLURM_NTASKS tasks on this one node.
n=${SLURM_NTASKS:?}
pids=()
for ((i = 0; i < n; i++)); do
  SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 SLURM_STEP_NUM_TASKS=$n \
    SLURM_STEP_TASKS_PER_NODE=$n SLURM_STEP_NODELIST=$SLURM_JOB_NODELIST SLURM_STEP_ID=0 "$@" &
  pids+=($!)
done
echo "$$" >"$SRUN_PIDS.srun"
echo "${pids[*]}" >"$SRUN_PIDS"
forward() { kill -"$1" "${pids[@]}" 2>/dev/null || true; }
trap 'forward USR1' USR1
trap 'forward TERM' TERM
rc=0
for p in "${pids[@]}"; do
  while true; do
    set +e; wait "$p"; c=$?; set -e
    # wait returns >128 when a trapped signal interrupts it: wait again.
    kill -0 "$p" 2>/dev/null && continue
    break
  done
  ((c > rc)) && rc=$c
done
exit $rc
SH
cat > "$tmp/bin/scontrol" <<'SH'
#!/usr/bin/env bash
case "$1" in
  requeue) echo "$2" >>"$REQUEUED" ;;
  show) echo 127.0.0.1 ;;
  *) exit 1 ;;
esac
SH
chmod +x "$tmp/bin/srun" "$tmp/bin/scontrol"
cat > "$tmp/job.yaml" <<YAML
seed: 3
model: {type: mlp, in_features: 16, hidden: [64, 64], num_classes: 4}
data:
  train: {dataset: {type: synthetic_classification, num_samples: 512, num_features: 16, num_classes: 4},
          batch_size: 8, shuffle: true, num_workers: 0}
optim_wrapper: {optimizer: {type: AdamW, lr: 0.01, weight_decay: 0.01}}
train_cfg: {by_epoch: false, max_iters: 200}
strategy: {type: ddp}
hooks: [{type: checkpoint, by_epoch: false, interval: 10}]
YAML
port=$(free_port)
export PATH="$tmp/bin:$PATH" JOB="$tmp/job.yaml" RUNNER_HOST="$bin" REQUEUED="$tmp/requeued" \
  SRUN_PIDS="$tmp/srun_pids" SLURM_JOB_ID=4242 SLURM_JOB_NODELIST=localhost SLURM_NTASKS=2 \
  SLURM_NNODES=1 MASTER_PORT=$port
unset SLURM_RESTART_COUNT
bash "$script" --set work_dir="$tmp/work" >"$tmp/first.log" 2>&1 &
batch=$!
for _ in $(seq 600); do [[ -f "$tmp/work/iter_20/meta.json" ]] && break; sleep 0.01; done
[[ -f "$tmp/work/iter_20/meta.json" ]] || fail "no checkpoint at iteration 20 after 6 s" "$tmp/first.log"
# The ranks stop (SIGSTOP) so that the signal lands mid-training whatever
# the machine's speed; SIGUSR1 to the step, as SLURM sends it; then on.
read -r -a ranks <"$tmp/srun_pids"
kill -STOP "${ranks[@]}"
kill -USR1 "$(cat "$tmp/srun_pids.srun")"
sleep 0.2
kill -CONT "${ranks[@]}"
rc=0
wait "$batch" || rc=$?
[[ $rc == 0 ]] || fail "the batch script exited $rc after SIGUSR1" "$tmp/first.log"
grep -q "requeueing job 4242" "$tmp/first.log" || fail "the script did not requeue" "$tmp/first.log"
[[ "$(cat "$tmp/requeued" 2>/dev/null)" == 4242 ]] || fail "scontrol requeue 4242 was not called" "$tmp/first.log"
saved=$(grep -o "saved checkpoint [^ ]*iter_[0-9]*" "$tmp/first.log" | tail -1 | sed 's/.*iter_//')
[[ -n "$saved" && "$saved" -lt 200 ]] || fail "no checkpoint saved before the end" "$tmp/first.log"

# SLURM runs the requeued job again.
SLURM_RESTART_COUNT=1 bash "$script" --set work_dir="$tmp/work" >"$tmp/second.log" 2>&1 ||
  fail "the requeued run failed" "$tmp/second.log"
grep -q "resume: restart 1 of the job (SLURM_RESTART_COUNT=1): resuming from the newest valid checkpoint, $tmp/work/iter_$saved" "$tmp/second.log" ||
  fail "the requeued run did not resume from iter_$saved" "$tmp/second.log"
"$bin" --config "$tmp/job.yaml" --nproc-per-node 2 --set work_dir="$tmp/whole" >"$tmp/whole.log" 2>&1 ||
  fail "the uninterrupted run failed" "$tmp/whole.log"
python3 "$here/../../common/compare_safetensors.py" "$tmp/work/iter_200/model.safetensors" \
  "$tmp/whole/iter_200/model.safetensors" --rel 0 --what "requeued at iteration $saved = uninterrupted" ||
  fail "the requeued run's parameters differ from the uninterrupted run's"
echo "ok   SIGUSR1 at iteration $saved saved and requeued; the requeued run resumed and equals the uninterrupted one"
