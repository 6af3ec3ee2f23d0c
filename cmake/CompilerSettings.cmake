# Warnings for our own code, ccache, and the precompiled LibTorch header.

# Applied per target (rh_target_warnings) so system headers and third-party
# code keep their own settings. -Werror is left to CI-style builds.
function(rh_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:C>:-Wall -Wextra -Wpedantic>)
endfunction()

if(RH_USE_CCACHE)
  find_program(RH_CCACHE ccache)
  if(RH_CCACHE)
    # The sloppiness settings let ccache cache translation units that use a
    # precompiled header (the PCH is rebuilt when LibTorch changes anyway).
    set(_launcher ${CMAKE_COMMAND} -E env
        "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
        ${RH_CCACHE})
    set(CMAKE_C_COMPILER_LAUNCHER ${_launcher})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
    message(STATUS "runner-host: compiling through ccache (${RH_CCACHE})")
  endif()
endif()

# Unity build (RH_UNITY_BUILD) of the host's libraries and the shipped
# plugins: most of a file's compile time is parsing the same headers and
# instantiating the same templates again (LibTorch's, spdlog's, yaml-cpp's),
# so batches compile far faster than their files one by one (World.cpp +
# ModelAccess.cpp + OptimWrapper.cpp: 73 s of CPU alone, 31 s as one unit;
# the libraries without LibTorch and the plugins: 380 s of CPU for the host
# and every plugin before, 265 s after, here). Twelve files a batch: the
# engine in 4 units instead of 7, the first run's build (rh_quickstart) 157 s
# of CPU and 84 s on 2 cores instead of 202 and 108 with six. A batch
# recompiles whole when one of its files changes.
# A file that cannot share a unit (a name clash in an anonymous namespace)
# is better fixed than excluded.
# GCC's -Wsubobject-linkage takes a file included into the batch for a
# header, and warns about every class of it with a member of a type from the
# anonymous namespace (the Impl of a pimpl); in a .cpp that is no ODR risk.
function(rh_unity_build target)
  if(RH_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 12)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
    endif()
  endif()
endfunction()

# Debug information of the RelWithDebInfo build: line tables (-g1) by
# default: stack traces, perf and gdb's backtraces keep file:line, and a
# LibTorch file compiles in three quarters of the time of -g (World.cpp: 31 s
# -> 23 s here); "full" (-g) when a session in gdb needs local variables.
set(RH_DEBUG_INFO "lines" CACHE STRING "debug information in RelWithDebInfo: lines (-g1) | full (-g)")
set_property(CACHE RH_DEBUG_INFO PROPERTY STRINGS lines full)
if(RH_DEBUG_INFO STREQUAL "lines")
  set(_rh_debug_flag -g1)
elseif(RH_DEBUG_INFO STREQUAL "full")
  set(_rh_debug_flag -g)
else()
  message(FATAL_ERROR "RH_DEBUG_INFO is '${RH_DEBUG_INFO}'; expected lines or full")
endif()
set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O2 ${_rh_debug_flag} -DNDEBUG")
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O2 ${_rh_debug_flag} -DNDEBUG")

# Sanitizers (RH_SANITIZE=address,undefined, or thread): our code, the SDK
# helpers, the plugins and the tests are instrumented; LibTorch and the other
# system libraries are not. Use a build directory of its own
# (tools/sanitize.sh). UBSan findings stop the program
# (-fno-sanitize-recover), so a test cannot pass over one.
set(RH_SANITIZE "" CACHE STRING "sanitizers to build with: address,undefined | thread | empty")
if(RH_SANITIZE)
  add_compile_options(-fsanitize=${RH_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${RH_SANITIZE})
  # -O1 compiles in half the time of -O2 -g under ASan (a test file 65 s ->
  # 30 s, a LibTorch plugin 68 s -> 32 s here, with -g1), and it is what the
  # sanitizers' authors advise.
  set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O1 ${_rh_debug_flag} -DNDEBUG")
  set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 ${_rh_debug_flag} -DNDEBUG")
  # GCC 12 at -O1 with ASan warns "may be used uninitialized" inside
  # libstdc++'s std::regex (std::function in _StateT), wherever a file of
  # ours builds a regex; the main build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  message(STATUS "runner-host: sanitizers ${RH_SANITIZE}")
endif()
