# rh_discover_test_suites(target [TEST_PREFIX p] [ONE_BY_ONE suite...]
#                         [DISCOVERY_TIMEOUT s] [PROPERTIES name value...])
#
# Registers a googletest binary's tests with ctest one suite per process,
# where gtest_discover_tests registers one test per process. For the
# binaries that link LibTorch: each of their processes pays LibTorch's
# start-up (~0.5 s of CPU on this machine; cli/RunnerEntry.hpp says why),
# which was 145 of the 171 seconds rh_engine_tests' 291 tests took one by
# one; as 31 suites the start-up costs 16 s.
#
# The ctest test of suite S is "<prefix>S" and runs the binary with
# --gtest_filter=S.* --rh_ctest_suite (tests/common/SuiteMain.cpp): it fails
# when a test fails, and is skipped (77) when every test of it skipped. A
# suite that may skip some of its tests and pass the rest is listed in
# ONE_BY_ONE: each of its tests is then its own ctest test
# ("<prefix>S.T"), so ctest reports each skip; the main refuses a partial
# skip in a suite not listed, naming it and this list.
#
# Like gtest_discover_tests (POST_BUILD mode), the list is made when the
# binary is built (TestSuitesDiscover.cmake) and ctest includes it.
set(_RH_TEST_SUITES_DISCOVER "${CMAKE_CURRENT_LIST_DIR}/TestSuitesDiscover.cmake")

function(rh_discover_test_suites target)
  cmake_parse_arguments(RH "" "TEST_PREFIX;DISCOVERY_TIMEOUT" "ONE_BY_ONE;PROPERTIES" ${ARGN})
  if(NOT RH_DISCOVERY_TIMEOUT)
    set(RH_DISCOVERY_TIMEOUT 60)
  endif()
  set(_base "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites")
  add_custom_command(
    TARGET ${target} POST_BUILD
    BYPRODUCTS "${_base}_tests.cmake"
    COMMAND "${CMAKE_COMMAND}"
            -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "TEST_WORKING_DIR=${CMAKE_CURRENT_BINARY_DIR}"
            -D "TEST_PREFIX=${RH_TEST_PREFIX}"
            -D "ONE_BY_ONE=${RH_ONE_BY_ONE}"
            -D "TEST_PROPERTIES=${RH_PROPERTIES}"
            -D "DISCOVERY_TIMEOUT=${RH_DISCOVERY_TIMEOUT}"
            -D "CTEST_FILE=${_base}_tests.cmake"
            -P "${_RH_TEST_SUITES_DISCOVER}"
    VERBATIM)
  file(WRITE "${_base}_include.cmake"
       "if(EXISTS \"${_base}_tests.cmake\")\n"
       "  include(\"${_base}_tests.cmake\")\n"
       "else()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\n"
       "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${_base}_include.cmake")
  # The main that knows --rh_ctest_suite.
  target_link_libraries(${target} PRIVATE rh_gtest_suite_main)
endfunction()
