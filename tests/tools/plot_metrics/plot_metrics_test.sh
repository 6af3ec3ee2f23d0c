#!/usr/bin/env bash
# tools/plot_metrics.py on two short real runs (the quickstart's MLP, tiny
# data, 2 epochs, two learning rates): a PNG for one run and for both
# overlaid, and a clear error naming the path for a work_dir without
# metrics.jsonl. Usage: plot_metrics_test.sh BUILD_DIR SOURCE_DIR PYTHON3
set -euo pipefail
BUILD="$1" SRC="$2" PYTHON="$3"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cat > "$TMP/job.yaml" <<YAML
_base_: $SRC/configs/quickstart.yaml
data:
  train: {dataset: {num_samples: 512}}
  val: {dataset: {num_samples: 256}}
train_cfg: {max_epochs: 2}
hooks:
  - {type: metrics}
YAML
"$BUILD/bin/runner-host" --config "$TMP/job.yaml" --set work_dir="$TMP/a"
"$BUILD/bin/runner-host" --config "$TMP/job.yaml" --set work_dir="$TMP/b" \
  --set optim_wrapper.optimizer.lr=0.0005

# A PNG: exists, the 8-byte signature, more than 10 kB (axes, curves, text).
check_png() {
  [ -f "$1" ] || { echo "no $1"; exit 1; }
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || { echo "$1: not a PNG"; exit 1; }
  local size; size=$(stat -c %s "$1")
  [ "$size" -gt 10240 ] || { echo "$1: only $size bytes"; exit 1; }
}
"$PYTHON" "$SRC/tools/plot_metrics.py" "$TMP/a"  # default: the work_dir's metrics.png
check_png "$TMP/a/metrics.png"
"$PYTHON" "$SRC/tools/plot_metrics.py" "$TMP/a" "$TMP/b" --label "lr 2e-3" "lr 5e-4" -o "$TMP/both.png"
check_png "$TMP/both.png"
# The overlay draws more than one run: it differs from a plot of one.
"$PYTHON" "$SRC/tools/plot_metrics.py" "$TMP/a" -o "$TMP/one.png"
! cmp -s "$TMP/one.png" "$TMP/both.png" || { echo "the overlay equals the single-run plot"; exit 1; }

expect_error() {  # expect_error "message part" args...
  local want="$1"; shift
  if "$PYTHON" "$SRC/tools/plot_metrics.py" "$@" > "$TMP/out" 2>&1; then
    echo "plot_metrics $* succeeded"; exit 1
  fi
  grep -qF -- "$want" "$TMP/out" || { echo "expected '$want' in:"; cat "$TMP/out"; exit 1; }
}
mkdir "$TMP/empty"
expect_error "$TMP/empty/metrics.jsonl: no such file" "$TMP/a" "$TMP/empty" -o "$TMP/x.png"
[ ! -e "$TMP/x.png" ] || { echo "wrote a plot despite the error"; exit 1; }
expect_error "1 --label names for 2 work_dirs" "$TMP/a" "$TMP/b" --label one -o "$TMP/x.png"
printf '{"mode": "train", "iter": 1, "loss": 1}\nnot json\n' > "$TMP/empty/metrics.jsonl"
expect_error "$TMP/empty/metrics.jsonl:2: not a JSON object" "$TMP/empty"
echo "plot_metrics_test: ok"
