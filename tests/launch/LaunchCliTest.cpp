// runner-host --nproc-per-node N, end to end: the program re-executes itself
// once per rank, without the launcher flags, and the workers do not launch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "common/TestUtil.hpp"

using rh::test::quote;
using ::testing::HasSubstr;

namespace {

rh::test::CommandResult run(const std::string& args, const std::string& env = "") {
  return rh::test::run_command("env -u RH_LAUNCHED -u RANK -u WORLD_SIZE " + env + " " +
                               quote(RH_RUNNER_HOST) + " " + args);
}

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(LaunchCli, TwoRanksPrintTheVersionOnceEach) {
  for (const std::string flags : {"--nproc-per-node 2", "--nproc-per-node=2 --master-port=0",
                                  "--nproc 2 --master-addr localhost --master-port 0"}) {
    SCOPED_TRACE(flags);
    auto r = run(flags + " --version");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(count(r.output, std::regex("\\[rank 0\\] runner-host [0-9.]+ \\(ABI ")), 1)
        << r.output;
    EXPECT_EQ(count(r.output, std::regex("\\[rank 1\\] runner-host [0-9.]+ \\(ABI ")), 1)
        << r.output;
    EXPECT_EQ(count(r.output, std::regex("runner-host [0-9.]+ \\(ABI ")), 2) << r.output;
  }
}

TEST(LaunchCli, WorkersFailingGiveTheirCode) {
  rh::test::TempDir dir;
  auto r = run("--nproc-per-node 2 --config " + quote((dir / "missing.yaml").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\\[rank [01]\\] runner-host: error: "));
  EXPECT_THAT(r.output,
              ::testing::ContainsRegex("runner-host launcher: rank [01] exited with code 2"));
}

TEST(LaunchCli, BadLauncherOptions) {
  auto r = run("--nproc-per-node 0 --version");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--nproc-per-node: expected 1 or more, got 0"));
  r = run("--nnodes 2 --master-port 0 --version");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--master-port 0 (pick a free port) needs --nnodes 1"));
  r = run("--nnodes 2 --node-rank 2 --version");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--node-rank: expected 0 to 1"));
}

TEST(LaunchCli, ALaunchedWorkerDoesNotLaunchAgain) {
  auto r = run("--nproc-per-node 2 --version", "RH_LAUNCHED=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("a launch cannot be nested"));
}

}  // namespace
