#!/usr/bin/env bash
# The data benchmark's tools at a tiny size: make_image_folder.py writes the
# folder, annotation list and class list it says, each image the same
# whatever else is generated; rh_bench_decode decodes 20 such files, names a
# file it cannot decode and refuses bad arguments; bench_data.sh (20 images,
# a 1 MiB token file, one round) prints each of its rows. (What they measure
# is not asserted: machines are noisy.) Exits 77 (a skip) where
# /usr/bin/python3 lacks numpy, PIL or torchvision and tools/install-deps.sh does not
# call that a failure.
#   data_bench_test.sh RH_BENCH_DECODE RH_BENCH_DATA SCRATCH_DIR
set -u
DECODE="$1"
DATA="$2"
DIR="$3/data_bench_test"
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
PY=/usr/bin/python3
rm -rf "$DIR" && mkdir -p "$DIR"
fail() { echo "FAIL: $*" >&2; exit 1; }

for pkg in numpy:python3-numpy PIL:python3-pil torchvision:python3-torchvision; do
  "$PY" -c "import ${pkg%%:*}" 2> /dev/null && continue
  why=$("$ROOT/tools/install-deps.sh" --missing-is-failure "${pkg##*:}") &&
    fail "$PY cannot import ${pkg%%:*}: $why"
  echo "skipped: $PY cannot import ${pkg%%:*}: $why"
  exit 77
done

# The folder: 2 classes x 10, with MMPretrain's annotation list and classes.txt.
out=$("$PY" "$ROOT/tools/data/make_image_folder.py" "$DIR/images" --classes 2 --per-class 10 \
  --seed 3 --ann-file "$DIR/train.txt" --meta "$DIR/classes.txt" 2>&1) || fail "make_image_folder.py: $out"
grep -qE "^$DIR/images: 20 JPEGs in 2 classes, [0-9.]+ MiB" <<< "$out" || fail "its summary: $out"
classes=$(find "$DIR/images" -mindepth 1 -maxdepth 1 -type d -printf '%f ' | tr ' ' '\n' | sort | tr '\n' ' ')
[ "$classes" = "n00000000 n00000001 " ] || fail "class folders: $classes"
files=$(find "$DIR/images/n00000001" -type f -printf '%f\n' | sort -n | tr '\n' ' ')
[ "$files" = "0.JPEG 1.JPEG 2.JPEG 3.JPEG 4.JPEG 5.JPEG 6.JPEG 7.JPEG 8.JPEG 9.JPEG " ] ||
  fail "n00000001 has: $files"
[ "$(sed -n '1p;20p' "$DIR/train.txt" | tr '\n' '|')" = "n00000000/0.JPEG 0|n00000001/9.JPEG 1|" ] ||
  fail "train.txt: $(head -3 "$DIR/train.txt")"
[ "$(wc -l < "$DIR/train.txt")" = 20 ] || fail "train.txt has $(wc -l < "$DIR/train.txt") lines"
[ "$(tr '\n' ' ' < "$DIR/classes.txt")" = "n00000000 n00000001 " ] || fail "classes.txt: $(cat "$DIR/classes.txt")"
# An image depends on (seed, class, n) only: not on --per-class or --jobs.
"$PY" "$ROOT/tools/data/make_image_folder.py" "$DIR/again" --classes 1 --per-class 3 --seed 3 \
  --jobs 1 > /dev/null || fail "make_image_folder.py --jobs 1"
cmp -s "$DIR/images/n00000000/2.JPEG" "$DIR/again/n00000000/2.JPEG" ||
  fail "n00000000/2.JPEG differs between --per-class 10 and 3"
size=$(stat -c %s "$DIR/images/n00000000/2.JPEG")
((size > 20000)) || fail "n00000000/2.JPEG has $size bytes: compresses too well to cost a photo's decode"

# rh_bench_decode on those 20 files.
out=$("$DECODE" --dir "$DIR/images" --threads 2 --rounds 2 2>&1) || fail "rh_bench_decode exit $?: $out"
echo "$out"
grep -qE "^decode limit: 20 JPEGs \([0-9.]+ MiB\) under $DIR/images, 2 threads" <<< "$out" ||
  fail "no header line naming 20 JPEGs"
grep -qE '^decode limit: [0-9.]+ images/s \(median of 2 rounds\)$' <<< "$out" || fail "no figure"
echo "not a JPEG" > "$DIR/images/n00000001/broken.jpg"
out=$("$DECODE" --dir "$DIR/images" --rounds 1 2>&1)
rc=$?
[ "$rc" -eq 1 ] || fail "a broken file: exit $rc: $out"
grep -qF "$DIR/images/n00000001/broken.jpg: not a JPEG libjpeg-turbo reads" <<< "$out" ||
  fail "a broken file: $out"
out=$("$DECODE" --threads 2 2>&1)
rc=$?
if [ "$rc" -ne 2 ] || ! grep -qF -- "--dir DIR is required" <<< "$out"; then
  fail "no --dir: exit $rc: $out"
fi

# bench_data.sh, tiny: 20 images, batch 4, a 1 MiB token file, one round.
out=$(RH_BUILD_DIR="$(dirname "$(dirname "$DATA")")" RH_BENCH_DATA_CACHE="$DIR/cache" RH_BENCH_ROUNDS=1 \
  RH_BENCH_BATCH=4 RH_BENCH_TOKEN_MB=1 "$ROOT/tools/bench/bench_data.sh" 2 20 2>&1) ||
  fail "bench_data.sh exit $?: $out"
echo "$out"
number='[0-9]+\.[0-9]+ +\([0-9. ]+\)$'
grep -qE "^  decode limit \(libjpeg-turbo alone\) +$number" <<< "$out" || fail "no decode limit row"
grep -qE "^  runner-host loader +$number" <<< "$out" || fail "no runner-host loader row"
grep -qE "^  torchvision DataLoader +$number" <<< "$out" || fail "no torchvision row"
grep -qE '^  torchvision / decode limit +[0-9.]+$' <<< "$out" || fail "no torchvision / decode row"
grep -qE '^  runner-host / torchvision +[0-9.]+  goal >= 1.5: (met|missed)$' \
  <<< "$out" || fail "no runner-host / torchvision row"
grep -qE '^  runner-host / decode limit +[0-9.]+  goal >= 0.8: (met|missed)$' \
  <<< "$out" || fail "no runner-host / decode limit row"
for ds in token_bin megatron_indexed; do
  grep -qE "^  $ds +[0-9.]+ M/s +[0-9.]+ M/s  [0-9.]+ \([0-9. ]+\)$" <<< "$out" || fail "no $ds row"
done
[ -f "$DIR/cache/tokens-1MiB-seed0/megatron.idx" ] || fail "no cached megatron.idx"
rm -rf "$DIR"
echo PASS
