#!/usr/bin/env bash
# A short real job (the quickstart's MLP, tiny data, 2 epochs) through the
# runner-host binary with both the `metrics` and the `tensorboard` hook; the
# independent reader (read_events.py: Python protobuf from the same .proto
# files, its own CRC-32C) checks every record of the event file and that its
# scalars, steps and order equal metrics.jsonl's.
# Usage: tensorboard_real_run.sh BUILD_DIR SOURCE_DIR PROTO_ROOT PYTHON3
set -euo pipefail
BUILD="$1" SRC="$2" PROTO_ROOT="$3" PYTHON="$4"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/job.yaml" <<YAML
_base_: $SRC/configs/quickstart.yaml
work_dir: $TMP/work
data:
  train: {dataset: {num_samples: 512}}
  val: {dataset: {num_samples: 256}}
train_cfg: {max_epochs: 2}
hooks:
  - {type: checkpoint, interval: 1}
  - {type: metrics}
  - {type: tensorboard}
YAML
"$BUILD/bin/runner-host" --config "$TMP/job.yaml"
files=("$TMP"/work/tensorboard/events.out.tfevents.*)
[ "${#files[@]}" -eq 1 ] && [ -f "${files[0]}" ] || { echo "expected one event file, got: ${files[*]}"; exit 1; }
# <time>.<host>.<pid>: ten digits of Unix time, this host's name, a pid.
name="$(basename "${files[0]}")"
[[ "$name" =~ ^events\.out\.tfevents\.[0-9]{10}\.$(hostname)\.[0-9]+$ ]] || { echo "bad file name $name"; exit 1; }
"$PYTHON" "$SRC/tests/plugins/hooks/tensorboard/read_events.py" "$PROTO_ROOT" "$TMP/work/tensorboard" \
  --compare "$TMP/work/metrics.jsonl"
# The job has train and val scalars (16 iterations of 8 x 64 samples, 2 vals).
"$PYTHON" "$SRC/tests/plugins/hooks/tensorboard/read_events.py" "$PROTO_ROOT" "$TMP/work/tensorboard" --dump > "$TMP/dump.jsonl"
grep -q '"tag": "loss", "step": 16,' "$TMP/dump.jsonl" || { echo "no train loss at step 16"; exit 1; }
grep -q '"tag": "val/accuracy/top1", "step": 16,' "$TMP/dump.jsonl" || { echo "no val/accuracy/top1 at step 16"; exit 1; }
# The reader is no rubber stamp: one flipped byte in a record's data, or a cut
# last record, fails it.
cp "${files[0]}" "$TMP/corrupt"
size=$(stat -c %s "$TMP/corrupt")
printf '\x7f' | dd of="$TMP/corrupt" bs=1 seek=$((size - 10)) conv=notrunc status=none
if "$PYTHON" "$SRC/tests/plugins/hooks/tensorboard/read_events.py" "$PROTO_ROOT" "$TMP/corrupt" --dump > "$TMP/out" 2>&1; then
  echo "the reader accepted a corrupted file"; exit 1
fi
grep -q "bad data CRC" "$TMP/out" || { cat "$TMP/out"; exit 1; }
head -c $((size - 3)) "${files[0]}" > "$TMP/cut"
if "$PYTHON" "$SRC/tests/plugins/hooks/tensorboard/read_events.py" "$PROTO_ROOT" "$TMP/cut" --dump > "$TMP/out" 2>&1; then
  echo "the reader accepted a truncated file"; exit 1
fi
grep -q "truncated" "$TMP/out" || { cat "$TMP/out"; exit 1; }
echo "tensorboard_real_run: ok"
