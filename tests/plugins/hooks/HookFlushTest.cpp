// The lines a hook keeps in memory (metrics, trace: flush_lines, flush_seconds) are
// in its file after a run that fails mid-epoch: runner-host is run as a user
// runs it, with a hook that fails at one iteration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "common/TestUtil.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(HookFlushTest, KeptLinesAreWrittenWhenTheRunFailsMidEpoch) {
  TempDir dir;
  // 100 iterations per epoch; the failing hook stops the run at iteration 37
  // (0-based) of epoch 0, after metrics (same priority, earlier in the job
  // file) has kept that iteration's line: no flush is due before (1000 lines,
  // an hour), so every line is only written because the run failed.
  const std::string fail_hook =
      (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_fail_on_rank.so").string();
  dir.write("fail.yaml",
            "work_dir: " + (dir / "work").string() +
                "\n"
                "seed: 1\n"
                "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3}\n"
                "data:\n"
                "  train: {dataset: {type: synthetic_classification, num_samples: 800, "
                "num_features: 8, num_classes: 3}, batch_size: 8, num_workers: 0}\n"
                "optim_wrapper: {optimizer: {type: SGD, lr: 0.01}}\n"
                "train_cfg: {by_epoch: true, max_epochs: 2}\n"
                "strategy: {type: single}\n"
                "hooks:\n"
                "  - {type: metrics, flush_lines: 1000, flush_seconds: 3600}\n"
                "  - {type: fail_on_rank, plugin: " +
                fail_hook + ", rank: 0, iter: 37}\n");
  const CommandResult r = run_command("cd " + quote(dir.path().string()) + " && " +
                                      quote(RH_RUNNER_HOST) + " --config fail.yaml");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("failing on purpose at rank 0, iteration 37"));

  const std::vector<std::string> lines = lines_of(read_file(dir / "work" / "metrics.jsonl"));
  ASSERT_EQ(lines.size(), 38u) << r.output;
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_THAT(lines[i], HasSubstr("{\"mode\": \"train\", \"epoch\": 0, \"iter\": " +
                                    std::to_string(i + 1) + ", \"loss\": "))
        << "line " << i;
    EXPECT_EQ(lines[i].back(), '}') << "line " << i;
  }
}

// The trace hook keeps per-iteration lines (flush_lines, flush_seconds) and
// writes them when the run fails: the run's last lines are its iteration 37.
TEST(HookFlushTest, KeptTraceLinesAreWrittenWhenTheRunFailsMidEpoch) {
  TempDir dir;
  // priority 0: trace sees each after_train_iter before the failing hook
  // (normal priority) stops the run at iteration 37 of epoch 0.
  const std::string fail_hook =
      (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_fail_on_rank.so").string();
  dir.write("fail.yaml",
            "work_dir: " + (dir / "work").string() +
                "\n"
                "seed: 1\n"
                "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3}\n"
                "data:\n"
                "  train: {dataset: {type: synthetic_classification, num_samples: 800, "
                "num_features: 8, num_classes: 3}, batch_size: 8, num_workers: 0}\n"
                "optim_wrapper: {optimizer: {type: SGD, lr: 0.01}}\n"
                "train_cfg: {by_epoch: true, max_epochs: 2}\n"
                "strategy: {type: single}\n"
                "hooks:\n"
                "  - {type: trace, priority: 0, flush_lines: 1000, flush_seconds: 3600}\n"
                "  - {type: fail_on_rank, plugin: " +
                fail_hook + ", rank: 0, iter: 37}\n");
  const CommandResult r = run_command("cd " + quote(dir.path().string()) + " && " +
                                      quote(RH_RUNNER_HOST) + " --config fail.yaml");
  ASSERT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("failing on purpose at rank 0, iteration 37"));

  const std::vector<std::string> lines = lines_of(read_file(dir / "work" / "trace.log"));
  const auto epoch = std::find(lines.begin(), lines.end(),
                               "before_train_epoch mode=train epoch=0 iter=0 inner_iter=0");
  ASSERT_NE(epoch, lines.end()) << r.output;
  // Every iteration's two lines up to the failing one, then nothing.
  const std::vector<std::string> iterations(epoch + 1, lines.end());
  ASSERT_EQ(iterations.size(), 2u * 38) << r.output;
  for (size_t i = 0; i < 38; ++i) {
    const std::string counters =
        " mode=train epoch=0 iter=" + std::to_string(i) + " inner_iter=" + std::to_string(i);
    EXPECT_EQ(iterations[2 * i], "before_train_iter" + counters);
    EXPECT_THAT(iterations[2 * i + 1], HasSubstr("after_train_iter" + counters + " loss="));
  }
}

}  // namespace
}  // namespace rh::test
