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

# Sanitizers (RH_SANITIZE=address,undefined, or thread): our code, the SDK
# helpers, the plugins and the tests are instrumented; LibTorch and the other
# system libraries are not. Use a build directory of its own
# (tools/sanitize.sh). UBSan findings stop the program
# (-fno-sanitize-recover), so a test cannot pass over one.
set(RH_SANITIZE "" CACHE STRING "sanitizers to build with: address,undefined | thread | empty")
if(RH_SANITIZE)
  add_compile_options(-fsanitize=${RH_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${RH_SANITIZE})
  message(STATUS "runner-host: sanitizers ${RH_SANITIZE}")
endif()
