# shellcheck shell=bash disable=SC2034  # sets variables for the caller
# Sourced by tools/build.sh and tools/install-deps.sh: which LibTorch to
# build against. One variable chooses:
#
#   RH_TORCH=system   Debian 12's LibTorch 1.13 (CPU; libtorch-dev). What CI
#                     builds and tests with.
#   RH_TORCH=python   the LibTorch inside python3's torch (a GPU machine's pip
#                     torch 2.x, torch.utils.cmake_prefix_path), with the
#                     nvidia-nccl wheel's NCCL when that imports.
#   RH_TORCH=auto     (default) python when python3's torch imports, was built
#                     with CUDA (torch.version.cuda), sees a GPU
#                     (torch.cuda.is_available()) and uses the C++11 ABI of
#                     Debian's libraries; system otherwise. A CUDA wheel on a
#                     machine without a GPU (pip's default torch) is not
#                     picked: that machine builds like CI; RH_TORCH=python
#                     forces it.
#
# RH_PYTHON names the interpreter (default: python3 on PATH).
#
# rh_torch_pick sets RH_TORCH_PICKED (system | python), RH_TORCH_REASON (a
# sentence), and for python: RH_TORCH_VERSION, RH_TORCH_CMAKE_DIR (its
# TorchConfig.cmake's folder), RH_NCCL_INCLUDE_DIR and RH_NCCL_LIBRARY (empty
# without the nvidia-nccl wheel). Returns 2 for a bad RH_TORCH, 1 when
# RH_TORCH=python cannot be honoured (the reason in RH_TORCH_REASON).

rh_torch_pick() {
  local mode="${RH_TORCH:-auto}" py="${RH_PYTHON:-python3}" info key value
  local version="" cuda="" gpu=0 abi="" cmake="" nccl=""
  RH_TORCH_PICKED=system RH_TORCH_REASON="" RH_TORCH_VERSION="" RH_TORCH_CMAKE_DIR=""
  RH_NCCL_INCLUDE_DIR="" RH_NCCL_LIBRARY=""
  case "$mode" in
    system)
      RH_TORCH_REASON="RH_TORCH=system"
      return 0
      ;;
    python | auto) ;;
    *)
      RH_TORCH_REASON="RH_TORCH=$mode: expected system, python or auto"
      return 2
      ;;
  esac
  # One interpreter start (importing torch 2.x takes seconds).
  info=$(timeout 300 "$py" - 2> /dev/null << 'PY'
import torch, torch.utils
cuda = torch.version.cuda or ""
print("version", torch.__version__)
print("cuda", cuda)
print("gpu", int(bool(cuda) and torch.cuda.is_available()))
print("abi", int(torch.compiled_with_cxx11_abi()))
print("cmake", torch.utils.cmake_prefix_path)
try:
    import nvidia.nccl as m
    print("nccl", list(m.__path__)[0])
except Exception:
    pass
PY
  ) || info=""
  while read -r key value; do
    case "$key" in
      version) version="$value" ;;
      cuda) cuda="$value" ;;
      gpu) gpu="$value" ;;
      abi) abi="$value" ;;
      cmake) cmake="$value" ;;
      nccl) nccl="$value" ;;
    esac
  done <<< "$info"

  # Why python3's torch is not the one, first reason first (auto asks for
  # CUDA and a GPU too; RH_TORCH=python only that it builds).
  local why=""
  if [ -z "$version" ]; then
    why="$py cannot import torch"
  elif [ "$mode" = auto ] && [ -z "$cuda" ]; then
    why="$py's torch $version is built without CUDA"
  elif [ "$mode" = auto ] && [ "$gpu" != 1 ]; then
    why="$py's torch $version (CUDA $cuda) sees no GPU"
  elif [ ! -f "$cmake/Torch/TorchConfig.cmake" ]; then
    why="$py's torch $version has no CMake package ($cmake/Torch/TorchConfig.cmake)"
  elif [ "$abi" != 1 ]; then
    why="$py's torch $version uses the pre-C++11 ABI; Debian's libraries (yaml-cpp, spdlog, Boost) use the C++11 one"
  fi
  if [ -n "$why" ] && [ "$mode" = auto ]; then
    RH_TORCH_REASON="RH_TORCH=auto: $why"
    return 0
  elif [ -n "$why" ]; then
    RH_TORCH_REASON="RH_TORCH=python, but $why"
    return 1
  fi

  RH_TORCH_PICKED=python RH_TORCH_VERSION="$version" RH_TORCH_CMAKE_DIR="$cmake/Torch"
  RH_TORCH_REASON="RH_TORCH=$mode: $py's torch $version (CUDA ${cuda:-none}$([ "$gpu" = 1 ] && echo ", a GPU visible"))"
  if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ]; then
    RH_NCCL_INCLUDE_DIR="$nccl/include"
    local lib
    for lib in "$nccl"/lib/libnccl.so*; do
      if [ -f "$lib" ]; then RH_NCCL_LIBRARY="$lib" && break; fi
    done
  fi
  return 0
}
