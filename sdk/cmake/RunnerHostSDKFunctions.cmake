# rh_add_plugin(<target> [TORCH] [OUTPUT_DIRECTORY <dir>] SOURCES <src>...)
#
# Builds a runner-host plugin: a MODULE library (lib<target>.so) linked
# against the SDK headers, with hidden visibility and a version script so
# that `rh_plugin_info` is its only exported symbol, and --no-undefined so a
# missing library is a link error rather than a load-time refusal. TORCH links
# LibTorch and defines RH_TORCH_DEVICE for the native ABI tag.
function(rh_add_plugin target)
  cmake_parse_arguments(ARG "TORCH" "OUTPUT_DIRECTORY" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "rh_add_plugin(${target}): SOURCES is required")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE RunnerHostSDK::sdk)
  # The directory of this file, wherever the function is called from (a
  # variable set at include time would only be visible in the includer's scope).
  set(_map "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/rh_plugin.map")
  set_target_properties(${target} PROPERTIES
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS "${_map}")
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${_map}" "LINKER:--no-undefined")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  endif()
  if(ARG_TORCH)
    if(COMMAND rh_find_torch)
      rh_find_torch()
    endif()
    target_link_libraries(${target} PRIVATE RunnerHostSDK::torch)
  endif()
endfunction()
