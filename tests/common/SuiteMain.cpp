// The main of the test binaries ctest runs one suite per process
// (tests/cmake/TestSuites.cmake says why). Run by hand it is googletest's
// own main. With --rh_ctest_suite (the ctest tests that file registers) the
// exit code is ctest's verdict on what ran:
//   0  every test passed;
//   1  a test failed, or no test matched the filter (a stale listing);
//   77 every test skipped (SKIP_RETURN_CODE: ctest reports it skipped);
//   1  some tests skipped and the others passed: one ctest result would
//      hide those skips, so the suite must be listed in ONE_BY_ONE, where
//      each test is a ctest test of its own.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <string>

namespace {

constexpr int kSkipped = 77;

// Removes `flag` from argv; true when it was there.
bool take_flag(int& argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], flag) != 0) continue;
    for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
    --argc;
    return true;
  }
  return false;
}

// "Suite.Test, Suite.Other" of the tests that skipped.
std::string skipped_names(const testing::UnitTest& unit) {
  std::string names;
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& info = *suite.GetTestInfo(t);
      if (!info.should_run() || !info.result()->Skipped()) continue;
      names += (names.empty() ? "" : ", ") + std::string(suite.name()) + "." + info.name();
    }
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  const bool ctest_suite = take_flag(argc, argv, "--rh_ctest_suite");
  testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (!ctest_suite) return rc;
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  if (rc != 0 || unit.failed_test_count() > 0) return 1;
  if (unit.test_to_run_count() == 0) {
    std::cerr << "no test matched the filter: the ctest listing is older than this binary "
                 "(rebuild it)\n";
    return 1;
  }
  if (unit.skipped_test_count() == 0) return 0;
  if (unit.successful_test_count() == 0) return kSkipped;
  std::cerr << "skipped " << skipped_names(unit) << " and passed the others: ctest would report "
            << "the suite passed and hide the skip. List the suite in ONE_BY_ONE of its "
            << "rh_discover_test_suites() (tests/cmake/TestSuites.cmake), where each of its "
            << "tests is a ctest test of its own.\n";
  return 1;
}
