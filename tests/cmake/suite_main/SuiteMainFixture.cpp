// The tests tests/cmake/suite_main/suite_main_test.sh runs through
// tests/common/SuiteMain.cpp, one suite at a time: one that passes, one
// that skips, one that does both, one that fails.
#include <gtest/gtest.h>

TEST(Passes, One) { EXPECT_EQ(1 + 1, 2); }
TEST(Passes, Two) { EXPECT_EQ(2 * 2, 4); }
TEST(Skips, One) { GTEST_SKIP() << "skipped on purpose"; }
TEST(Mixed, Passes) { EXPECT_EQ(1, 1); }
TEST(Mixed, Skips) { GTEST_SKIP() << "skipped on purpose"; }
TEST(Fails, One) { EXPECT_EQ(1, 2) << "fails on purpose"; }
