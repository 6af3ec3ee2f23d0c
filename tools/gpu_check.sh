#!/usr/bin/env bash
# The GPU check (issue 30): builds runner-host on a GPU machine against its
# Python torch's LibTorch 2.x + CUDA and the nvidia-nccl wheel's NCCL, runs
# the tests that need a GPU or LibTorch 2.x, the GPU paths end to end, and
# the GPU benchmark against PyTorch eager (tools/bench/bench_gpu.sh).
#
# A GPU machine typically has Python's torch with CUDA, nvcc, cmake and
# ninja, but none of the Debian libraries runner-host builds with (yaml-cpp,
# spdlog, Boost, Gloo, dlpack, protobuf, GoogleTest, benchmark). So, in two
# steps:
#   tools/gpu_check.sh --fetch-debs .gpu/debs   on Debian 12 (this project's
#       machine): downloads those packages' .deb files, never installs them
#   tools/gpu_check.sh                          on the GPU machine, from the
#       project root with .gpu/debs beside it: unpacks them into a prefix
#       under /tmp (never into /), configures, builds, checks
# A machine with Debian 12's libraries installed needs neither: there
# `RH_TORCH=python tools/build.sh` builds against the Python LibTorch
# (docs/gpu.md).
#
# Output: every section's lines on stdout, and $OUT/gpu_check.log (OUT
# defaults to /tmp/gpu_check). Exit 0 only when every check passed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ "${1:-}" = --fetch-debs ]; then
  dir=${2:?usage: tools/gpu_check.sh --fetch-debs DIR}
  mkdir -p "$dir"
  cd "$dir" || exit 1
  apt-get download libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
    libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0 libgloo-dev \
    libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200 libdlpack-dev \
    libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32 libgtest-dev \
    libgmock-dev libbenchmark-dev libbenchmark1debian 2>&1 | grep -v '^W:'
  got=$(ls ./*.deb 2> /dev/null | wc -l)
  echo "$got .deb files in $dir"
  [ "$got" -eq 25 ] || { echo "expected 25: apt-get download failed for some (above)" >&2; exit 1; }
  exit 0
fi

DEBS="${RH_GPU_DEBS:-$ROOT/.gpu/debs}"
DEPS=/tmp/rh-gpu-deps
B="${RH_BUILD_DIR:-/tmp/rh-gpu-build}"
W=/tmp/rh-gpu-work
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$DEPS" "$W" "$OUT"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
t0=$SECONDS
failures=()
stamp() { echo "=== [$((SECONDS - t0)) s] $*"; }
check() {  # NAME CONDITION-COMMAND...: records a failure, never stops
  local name=$1
  shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; failures+=("$name"); fi
}

stamp environment
nvidia-smi -L
g++ --version | head -1
python3 -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count())'

stamp "unpack $(ls "$DEBS"/*.deb 2> /dev/null | wc -l) .deb files into $DEPS"
for f in "$DEBS"/*.deb; do dpkg -x "$f" "$DEPS"; done
export LD_LIBRARY_PATH="$DEPS/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# (RH_GPU_TORCH_PREFIX / RH_GPU_NCCL_DIR: another LibTorch / NCCL, to try
# the script's build on a machine without pip's torch.)
TC=${RH_GPU_TORCH_PREFIX:-$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')}
NC=${RH_GPU_NCCL_DIR:-$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')}
LIB="$DEPS/usr/lib/x86_64-linux-gnu"

stamp configure
cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TC;$DEPS/usr" \
  -DCMAKE_LIBRARY_ARCHITECTURE=x86_64-linux-gnu -DRH_USE_CCACHE=OFF -DRH_WITH_NCCL=ON \
  -DRH_NCCL_INCLUDE_DIR="$NC/include" -DRH_NCCL_LIBRARY="$(ls "$NC"/lib/libnccl.so* | head -1)" \
  -DProtobuf_PROTOC_EXECUTABLE="$DEPS/usr/bin/protoc" -DProtobuf_INCLUDE_DIR="$DEPS/usr/include" \
  -DProtobuf_LIBRARY="$LIB/libprotobuf.so" -DProtobuf_LITE_LIBRARY="$LIB/libprotobuf-lite.so" \
  -DRH_SYSTEM_PYTHON3="$(command -v python3)" > "$OUT/configure.log" 2>&1 ||
  { tail -30 "$OUT/configure.log"; exit 1; }
grep -E "runner-host: (LibTorch|NCCL)" "$OUT/configure.log"

stamp build
ninja -C "$B" -k 0 -j "$(nproc)" rh_runtime rh_comm_tests rh_engine_tests > "$OUT/build.log" 2>&1
rc=$?
grep -E "error|FAILED|warning" "$OUT/build.log" | head -20
echo "build rc=$rc"
RH="$B/bin/runner-host"
[ -x "$RH" ] || exit 1

stamp "tests that need a GPU or LibTorch 2.x"
timeout 300 "$B/bin/rh_comm_tests" --gtest_filter='Nccl*:RankDevice*' > "$OUT/comm_tests.log" 2>&1
check "rh_comm_tests Nccl*:RankDevice*" test $? -eq 0
grep -E "^\[ +(OK|FAILED|SKIPPED) +\]" "$OUT/comm_tests.log"
timeout 300 "$B/bin/rh_engine_tests" \
  --gtest_filter='TorchServices*:TransformerBlock*:GradScaler*:OptimSchema*:OptimWrapper*:Gpt*:Vit*' \
  > "$OUT/engine_tests.log" 2>&1
check "rh_engine_tests (Stream_Current, SDPA = explicit attention, fused AdamW)" test $? -eq 0
grep -E "^\[ +(FAILED|SKIPPED) +\]|PASSED|tests ran" "$OUT/engine_tests.log"

stamp "the GPU paths end to end"
cat "$ROOT"/host/*/*.cpp "$ROOT"/plugins/*/*/*.cpp "$ROOT"/README.md > "$W/text.txt"
gpt() {  # NAME ITERS STRATEGY OPTIM [HOOKS]: a small gpt on the GPU
  cat > "$W/$1.yaml" << YAML
work_dir: $W/$1
seed: 0
model: {type: gpt, vocab_size: 256, block_size: 64, dim: 128, depth: 2, heads: 4}
data: {train: {dataset: {type: char_lm, path: $W/text.txt, block_size: 64}, batch_size: 16, shuffle: true, num_workers: 0}}
optim_wrapper: $4
train_cfg: {by_epoch: false, max_iters: $2}
strategy: $3
hooks: [{type: metrics}, {type: checkpoint, by_epoch: false, interval: $2}]
YAML
}
last() {  # FILE KEY: the last train line's value
  python3 -c "import json,sys; L=[json.loads(l) for l in open(sys.argv[1]) if '\"train\"' in l]; print(float(L[-1][sys.argv[2]]))" "$1" "$2"
}
# The quickstart with AmpOptimWrapper: float16 and a dynamic scale on a GPU.
timeout 120 "$RH" --config "$ROOT/configs/quickstart.yaml" --set work_dir="$W/q" \
  --set optim_wrapper.type=AmpOptimWrapper > "$W/q.log" 2>&1
grep -E "AmpOptimWrapper|accuracy/top1" "$W/q.log" | tail -2
check "quickstart AmpOptimWrapper float16 on the GPU >= 90%" \
  grep -qE "Epoch\(val\) \[10\].*accuracy/top1: (9[0-9]|100)\." "$W/q.log"
# An inf on iteration 3 in float16: skipped, the scale halved.
gpt inf 6 "{type: single}" "{type: AmpOptimWrapper, dtype: float16, optimizer: {type: AdamW, lr: 0.001}}"
RH_FAULT_INJECT=amp_inf_grad:0:3 timeout 120 "$RH" --config "$W/inf.yaml" > "$W/inf.log" 2>&1
grep -E "skipped" "$W/inf.log" | head -2
check "fp16 overflow skips the step and halves the scale" \
  test "$(last "$W/inf/metrics.jsonl" skipped_steps) $(last "$W/inf/metrics.jsonl" loss_scale)" = "1.0 32768.0"
# ddp on one rank (NCCL, a world of one) takes single's steps: the same
# kernels in the same order (SGD, whose steps do not amplify the GPU's
# non-deterministic backward atomics as Adam's would), so the same weights
# up to that non-determinism.
gpt s1 20 "{type: single}" "{optimizer: {type: SGD, lr: 0.1}}"
gpt d1 20 "{type: ddp}" "{optimizer: {type: SGD, lr: 0.1}}"
timeout 120 "$RH" --config "$W/s1.yaml" > "$W/s1.log" 2>&1
timeout 120 "$RH" --config "$W/d1.yaml" --nproc-per-node 1 --set dist.backend=nccl > "$W/d1.log" 2>&1
grep -m1 "rendezvous" "$W/d1.log"
same() {  # A B: equal, or within 1e-5 of each tensor's largest value
  python3 - "$1" "$2" << 'PY'
import sys
from safetensors.torch import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
worst = max(float((a[k] - b[k]).abs().max() / a[k].abs().max().clamp_min(1e-12)) for k in a)
print(f"  max relative difference {worst:.3g} over {len(a)} tensors")
sys.exit(0 if worst < 1e-5 else 1)
PY
}
check "ddp on 1 rank (nccl) = single within 1e-5" \
  same "$W/s1/iter_20/model.safetensors" "$W/d1/iter_20/model.safetensors"
# Two ranks on one GPU with nccl: refused before NCCL starts, naming the fix.
if [ "$(nvidia-smi -L | wc -l)" -eq 1 ]; then
  gpt two 2 "{type: ddp}" "{optimizer: {type: AdamW, lr: 0.001}}"
  timeout 120 "$RH" --config "$W/two.yaml" --nproc-per-node 2 --set dist.backend=nccl > "$W/two.log" 2>&1
  grep -m1 "would share one GPU" "$W/two.log"
  check "2 ranks on 1 GPU refused before NCCL" grep -q "would share one GPU" "$W/two.log"
fi
# A GPU checkpoint resumes on the CPU (CUDA_VISIBLE_DEVICES= hides the GPU).
gpt cpu 22 "{type: single}" "{optimizer: {type: SGD, lr: 0.1}}"
CUDA_VISIBLE_DEVICES= timeout 120 "$RH" --config "$W/cpu.yaml" --set resume="$W/s1/iter_20" > "$W/cpu.log" 2>&1
check "a GPU checkpoint resumes on the CPU" grep -q "resumed from" "$W/cpu.log"

stamp "benchmark: runner-host against PyTorch eager"
# Within what is left of RH_GPU_CHECK_BUDGET seconds (default 540, for a
# machine lent by the quarter hour); the large model first.
left=$(("${RH_GPU_CHECK_BUDGET:-540}" - (SECONDS - t0)))
[ "$left" -lt 60 ] && left=60
timeout "$left" env RH_BUILD_DIR="$B" "$ROOT/tools/bench/bench_gpu.sh" both | tee "$OUT/bench_gpu.md"

stamp done
if [ ${#failures[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failures[@]}"
  exit 1
fi
echo "every check passed"
