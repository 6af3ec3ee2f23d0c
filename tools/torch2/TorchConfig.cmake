# A stand-in for LibTorch 2.6's TorchConfig.cmake, used only by
# tools/check_torch2.sh: Debian 13's libtorch-cuda-dev is unpacked (never
# installed) for its headers, and its own config cannot be used because its
# .so files are absent. This one gives what cmake/Dependencies.cmake reads
# from a CUDA build of LibTorch 2.x: TORCH_INCLUDE_DIRS, TORCH_LIBRARIES,
# TORCH_CXX_FLAGS, Torch_VERSION and the c10_cuda / torch_cuda targets (here
# INTERFACE targets carrying the CUDA toolkit's headers). Nothing built
# against it links: the check compiles with -fsyntax-only.
#
# RH_TORCH2_PREFIX: the unpacked package's usr/ folder.
if(NOT RH_TORCH2_PREFIX OR NOT EXISTS "${RH_TORCH2_PREFIX}/include/torch/csrc/api/include/torch/version.h")
  message(FATAL_ERROR "tools/torch2/TorchConfig.cmake: set RH_TORCH2_PREFIX to the unpacked "
                      "libtorch-cuda-dev's usr/ folder (tools/check_torch2.sh does)")
endif()
file(STRINGS "${RH_TORCH2_PREFIX}/include/torch/csrc/api/include/torch/version.h" _rh_v
     REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3"
       Torch_VERSION "${_rh_v}")
set(Torch_FOUND TRUE)
set(TORCH_FOUND TRUE)
set(TORCH_INCLUDE_DIRS "${RH_TORCH2_PREFIX}/include"
                       "${RH_TORCH2_PREFIX}/include/torch/csrc/api/include")
set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=1")

find_package(CUDAToolkit REQUIRED)
if(NOT TARGET c10_cuda)
  add_library(c10_cuda INTERFACE IMPORTED)
  set_target_properties(c10_cuda PROPERTIES INTERFACE_INCLUDE_DIRECTORIES
                                            "${CUDAToolkit_INCLUDE_DIRS}")
  add_library(torch_cuda INTERFACE IMPORTED)
  set_target_properties(torch_cuda PROPERTIES INTERFACE_LINK_LIBRARIES c10_cuda)
  add_library(torch INTERFACE IMPORTED)
  set_target_properties(torch PROPERTIES INTERFACE_LINK_LIBRARIES torch_cuda)
endif()
set(TORCH_LIBRARIES torch)
