# Every dependency comes from Debian packages (see tools/install-deps.sh).

find_package(Threads REQUIRED)
find_package(dlpack REQUIRED)              # libdlpack-dev
find_package(yaml-cpp REQUIRED)            # libyaml-cpp-dev
find_package(spdlog REQUIRED)              # libspdlog-dev
find_package(Boost 1.74 REQUIRED COMPONENTS program_options)  # libboost-dev (DLL), -program-options-dev
find_package(Torch REQUIRED)               # libtorch-dev (1.13 CPU) or the pip wheel's LibTorch 2.x
# Required, not optional: the shipped `tensorboard` hook writes its events
# with protobuf (libprotobuf-dev, protobuf-compiler); only that plugin links it.
find_package(Protobuf 3.12 REQUIRED)
if(NOT TARGET protobuf::protoc OR NOT TARGET protobuf::libprotobuf-lite)
  message(FATAL_ERROR "runner-host: protoc and libprotobuf-lite are required by the tensorboard "
                      "hook: install protobuf-compiler libprotobuf-dev (tools/install-deps.sh)")
endif()
# The hook is a shared module, so libprotobuf-lite must be the shared library:
# a static libprotobuf-lite.a (Debian's is not position independent) fails
# only at link time ("relocation R_X86_64_TPOFF32 ... recompile with -fPIC").
# FindProtobuf picks the .a when libprotobuf-lite.so is absent, e.g. where
# libprotobuf-dev's files were unpacked without libprotobuf-lite32's.
function(rh_require_shared_protobuf_lite)
  set(_target protobuf::libprotobuf-lite)
  get_target_property(_type ${_target} TYPE)
  # Its files: IMPORTED_LOCATION and IMPORTED_LOCATION_<CONFIG> for every
  # configuration it names (FindProtobuf or protobuf's own CMake package).
  get_target_property(_configs ${_target} IMPORTED_CONFIGURATIONS)
  if(NOT _configs)
    set(_configs "")
  endif()
  set(_properties IMPORTED_LOCATION)
  foreach(_config IN LISTS _configs ITEMS RELEASE RELWITHDEBINFO DEBUG MINSIZEREL NOCONFIG)
    string(TOUPPER "${_config}" _config)
    list(APPEND _properties IMPORTED_LOCATION_${_config})
  endforeach()
  set(_files ${Protobuf_LITE_LIBRARY})
  foreach(_property IN LISTS _properties)
    get_target_property(_file ${_target} ${_property})
    if(_file)
      list(APPEND _files "${_file}")
    endif()
  endforeach()
  list(FILTER _files INCLUDE REGEX "\\.a$")
  if(_type STREQUAL "STATIC_LIBRARY" OR _files)
    list(REMOVE_DUPLICATES _files)
    message(FATAL_ERROR
      "runner-host: the tensorboard hook (a shared module) needs the shared libprotobuf-lite.so, "
      "but ${_target} is the static ${_files} (not position independent: the link would fail "
      "with \"relocation R_X86_64_TPOFF32 ... recompile with -fPIC\"). Fix: install the shared "
      "library (Debian: libprotobuf-lite32, which libprotobuf-dev depends on; "
      "tools/install-deps.sh), or point -DProtobuf_LITE_LIBRARY at a libprotobuf-lite.so of the "
      "same version as protoc and the headers.")
  endif()
endfunction()
rh_require_shared_protobuf_lite()

# LibTorch 1.13's TORCH_LIBRARIES lists plain names; gather them into one
# target that carries the include dirs and the C++ ABI flag.
add_library(rh_torch INTERFACE)
target_link_libraries(rh_torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(rh_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
target_compile_options(rh_torch INTERFACE ${_torch_flags})
if(TARGET torch_cuda OR TARGET c10_cuda)
  set(RH_TORCH_DEVICE "cuda")
else()
  set(RH_TORCH_DEVICE "cpu")
endif()
target_compile_definitions(rh_torch INTERFACE RH_TORCH_DEVICE="${RH_TORCH_DEVICE}")
message(STATUS "runner-host: LibTorch ${Torch_VERSION} (${RH_TORCH_DEVICE})")

# Optional: NCCL (with the CUDA toolkit) for the nccl communicator.
set(RH_HAVE_NCCL OFF)
if(NOT RH_WITH_NCCL STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    find_path(RH_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(RH_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib64)
  endif()
  if(RH_NCCL_INCLUDE_DIR AND RH_NCCL_LIBRARY)
    set(RH_HAVE_NCCL ON)
    message(STATUS "runner-host: NCCL found (${RH_NCCL_LIBRARY}), CUDA ${CUDAToolkit_VERSION}")
  elseif(RH_WITH_NCCL STREQUAL "ON")
    message(FATAL_ERROR "RH_WITH_NCCL=ON but CUDA/NCCL were not found")
  else()
    message(STATUS "runner-host: NCCL not found; the nccl communicator is not built")
  endif()
endif()

# Gloo library (libgloo-dev) for the CPU collectives c10d 1.13 lacks.
find_library(RH_GLOO_LIBRARY gloo)
find_path(RH_GLOO_INCLUDE_DIR gloo/reduce_scatter.h)
