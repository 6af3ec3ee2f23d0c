# shellcheck shell=bash
# torch26_common.sh — sourced by the benchmarks that run runner-host on
# LibTorch 1.13 here and on 2.6 in the Debian 13 chroot beside PyTorch 2.6's
# peers (bench_torch26.sh, bench_memory.sh). Expects ROOT; sets BUILD (the
# 1.13 build: RH_BUILD_DIR, build/), BUILD26 (the 2.6 build, absolute:
# RH_TORCH2_BUILD_DIR, build-torch26/) and CHROOT (RH_TORCH2_CHROOT); gives:
#   t26_why_not            why these cannot run here (nothing if they can)
#   in_chroot CMD...       CMD in the chroot (tools/torch2_chroot.sh), with a
#                          2.6 build outside this checkout bound at its own path
#   t26_start NAME WHY_NOT --why-not's answer, or the reason to stop, or WORK
#   t26_gpt_job FILE ITERS T DIM DEPTH BATCH   the benchmarks' gpt job (vocab
#                          256, 8 heads, char_lm on README.md, AdamW, metrics)
BUILD="${RH_BUILD_DIR:-$ROOT/build}"
BUILD26="$(realpath -m "${RH_TORCH2_BUILD_DIR:-$ROOT/build-torch26}")"
CHROOT="${RH_TORCH2_CHROOT:-$HOME/.cache/runner-host/trixie}"

t26_why_not() {
  [ "$(id -u)" -eq 0 ] || { echo "needs root (tools/torch2_chroot.sh: mounts, chroot)"; return; }
  [ -f "$CHROOT/.rh-debootstrap-done" ] || { echo "no Debian 13 chroot at $CHROOT (tools/torch2_chroot.sh --create makes it, ~6 min)"; return; }
  [ -d "$CHROOT/usr/lib/python3/dist-packages/torch" ] || { echo "the chroot has no python3-torch (tools/torch2_chroot.sh --create installs it)"; return; }
  [ -x "$BUILD/bin/runner-host" ] || { echo "no runner-host at $BUILD/bin (tools/build.sh)"; return; }
  [ -x "$BUILD26/bin/runner-host" ] || { echo "no LibTorch 2.6 runner-host at $BUILD26/bin (tools/test.sh --torch2 builds build-torch26/; or set RH_TORCH2_BUILD_DIR)"; return; }
}

in_chroot() {
  # shellcheck disable=SC2016  # $1 and $2 are the inner bash's
  case "$BUILD26/" in
    "$ROOT"/*) "$ROOT/tools/torch2_chroot.sh" "$@" ;;
    *) unshare --mount --propagation private -- bash -euc \
         'mkdir -p "$2$1" && mount --bind "$1" "$2$1" && shift 2 && exec "$@"' \
         bash "$BUILD26" "$CHROOT" "$ROOT/tools/torch2_chroot.sh" "$@" ;;
  esac
}

# NAME WHY_NOT: with WHY_NOT 1 (--why-not) prints the caller's why_not and
# exits 0; else exits 2 with that reason, or makes WORK, a folder under the
# checkout (the chroot sees it), removed at exit unless RH_BENCH_KEEP is set.
t26_start() {
  if [ "$2" = 1 ]; then why_not; exit 0; fi
  local reason
  reason=$(why_not)
  if [ -n "$reason" ]; then
    echo "$1.sh: $reason" >&2
    exit 2
  fi
  WORK="$(mktemp -d "$ROOT/build-$1.XXXXXX")"
  if [ -n "${RH_BENCH_KEEP:-}" ]; then
    echo "$1.sh: keeping $WORK (RH_BENCH_KEEP)" >&2
  else
    trap 'rm -rf "$WORK"' EXIT
  fi
}

t26_gpt_job() {  # FILE ITERS T DIM DEPTH BATCH
  cat > "$1" <<YAML
seed: 0
model: {type: gpt, vocab_size: 256, block_size: $3, dim: $4, depth: $5, heads: 8}
data:
  train: {dataset: {type: char_lm, path: $ROOT/README.md, block_size: $3, split: train},
          batch_size: $6, shuffle: true, num_workers: 1}
optim_wrapper: {optimizer: {type: AdamW, lr: 0.0001, weight_decay: 0.1}}
train_cfg: {by_epoch: false, max_iters: $2}
hooks: [{type: metrics}]
YAML
}
