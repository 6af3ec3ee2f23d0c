// The `metrics` hook (plugins/hooks/metrics): the JSON lines it writes, when
// it opens its file (not in a dry run), and how a resumed run continues it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/PluginTestHost.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class MetricsHookTest : public ::testing::Test {
 protected:
  void SetUp() override { host_.load("rh_hook_metrics"); }

  fs::path file() const { return host_.work_dir() / "metrics.jsonl"; }

  void train_iter(host::HookInstance& hook, int64_t epoch, int64_t iter,
                  std::vector<std::pair<std::string, double>> metrics) {
    event_.state.mode = RH_MODE_TRAIN;
    event_.state.epoch = epoch;
    event_.state.iter = iter;
    event_.metrics = std::move(metrics);
    ASSERT_EQ(event_.send(hook, RH_EVENT_AFTER_TRAIN_ITER), "");
  }
  void eval_epoch(host::HookInstance& hook, rh_HookEvent event, int64_t epochs_done,
                  int64_t iters_done, std::vector<std::pair<std::string, double>> metrics) {
    event_.state.mode = event == RH_EVENT_AFTER_TEST_EPOCH ? RH_MODE_TEST : RH_MODE_VAL;
    event_.state.epoch = epochs_done;
    event_.state.iter = iters_done;
    event_.metrics = std::move(metrics);
    ASSERT_EQ(event_.send(hook, event), "");
  }

  PluginTestHost host_;
  Event event_;
};

TEST_F(MetricsHookTest, DescribesItselfAndSubscribesToWhatItUses) {
  auto hook = host_.create_hook("{type: metrics}");
  EXPECT_EQ(host_.load("rh_hook_metrics").components.at(0).type_name, "metrics");
  EXPECT_EQ(hook->priority(), RH_PRIORITY_NORMAL);
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_TRAIN_ITER));
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_VAL_EPOCH));
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_TEST_EPOCH));
  EXPECT_FALSE(hook->wants(RH_EVENT_AFTER_VAL_ITER));
  EXPECT_FALSE(hook->wants(RH_EVENT_BEFORE_RUN));
  // Where it writes the lines it keeps.
  for (rh_HookEvent e : {RH_EVENT_AFTER_TRAIN_EPOCH, RH_EVENT_AFTER_TRAIN,
                         RH_EVENT_BEFORE_SAVE_CHECKPOINT, RH_EVENT_AFTER_RUN})
    EXPECT_TRUE(hook->wants(e)) << "event " << e;
}

TEST_F(MetricsHookTest, ADryRunWritesNothing) {
  { auto hook = host_.create_hook("{type: metrics}"); }
  EXPECT_FALSE(fs::exists(host_.work_dir()));
}

TEST_F(MetricsHookTest, WritesOneJsonLinePerEvent) {
  auto hook = host_.create_hook("{type: metrics, interval: 2, flush_lines: 1}");
  train_iter(*hook, 0, 0, {{"loss", 0.5}, {"lr", 0.002}});  // iteration 1: off-interval
  EXPECT_FALSE(fs::exists(file()));
  train_iter(*hook, 0, 1, {{"loss", 0.43}, {"lr", 0.002}, {"time", 0.0123}});
  // Readable while the hook lives.
  EXPECT_EQ(read_file(file()),
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 2, \"loss\": 0.43, \"lr\": 0.002, "
            "\"time\": 0.0123}\n");
  train_iter(*hook, 0, 2, {{"loss", 0.4}});
  train_iter(*hook, 1, 3, {{"loss", 1e-20}, {"big", 123456789012.0}});
  eval_epoch(*hook, RH_EVENT_AFTER_VAL_EPOCH, 2, 4, {{"accuracy/top1", 91.2}, {"loss", 0.3}});
  eval_epoch(*hook, RH_EVENT_AFTER_TEST_EPOCH, 2, 4, {{"accuracy/top1", 90.0}});
  EXPECT_EQ(read_file(file()),
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 2, \"loss\": 0.43, \"lr\": 0.002, "
            "\"time\": 0.0123}\n"
            "{\"mode\": \"train\", \"epoch\": 1, \"iter\": 4, \"loss\": 1e-20, \"big\": "
            "123456789012}\n"
            "{\"mode\": \"val\", \"epoch\": 2, \"iter\": 4, \"accuracy/top1\": 91.2, \"loss\": "
            "0.3}\n"
            "{\"mode\": \"test\", \"epoch\": 2, \"iter\": 4, \"accuracy/top1\": 90}\n");
}

TEST_F(MetricsHookTest, WritesStrictJson) {
  auto hook = host_.create_hook("{type: metrics, flush_lines: 1}");
  const double inf = std::numeric_limits<double>::infinity();
  train_iter(*hook, 0, 0,
             {{"loss", std::nan("")},
              {"scale", -inf},
              {"quote\"back\\slash\ttab", 1},
              {"iter", 5},
              {"x", 1},
              {"x", 2}});
  EXPECT_EQ(read_file(file()),
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 1, \"loss\": null, \"scale\": null, "
            "\"quote\\\"back\\\\slash\\ttab\": 1, \"x\": 1}\n");
  // Each left-out name is reported once.
  train_iter(*hook, 0, 1, {{"iter", 5}});
  const auto warnings = host_.log_texts(RH_LOG_WARN);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[0], HasSubstr("metric 'iter' is left out of " + file().string()));
  EXPECT_THAT(warnings[1], HasSubstr("metric 'x' is left out"));
}

TEST_F(MetricsHookTest, AResumedRunAppends) {
  {
    auto hook = host_.create_hook("{type: metrics}");
    train_iter(*hook, 0, 0, {{"loss", 1}});
  }
  {
    auto hook = host_.create_hook("{type: metrics}");
    train_iter(*hook, 0, 1, {{"loss", 2}});
  }
  EXPECT_EQ(read_file(file()),
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 1, \"loss\": 1}\n"
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 2, \"loss\": 2}\n");
}

TEST_F(MetricsHookTest, ALineCutByACrashIsNotContinued) {
  fs::create_directories(host_.work_dir());
  std::ofstream(file()) << "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 1, \"lo";
  auto hook = host_.create_hook("{type: metrics, flush_lines: 1}");
  train_iter(*hook, 0, 1, {{"loss", 2}});
  EXPECT_EQ(read_file(file()),
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 1, \"lo\n"
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 2, \"loss\": 2}\n");
}

// Lines are kept and written together: after flush_lines lines, and at each
// point where a run may stop or be resumed from.
TEST_F(MetricsHookTest, KeepsLinesUntilAFlushIsDue) {
  auto hook = host_.create_hook("{type: metrics, flush_lines: 3, flush_seconds: 3600}");
  auto line = [](int iter) {
    return "{\"mode\": \"train\", \"epoch\": 0, \"iter\": " + std::to_string(iter) +
           ", \"loss\": 1}\n";
  };
  train_iter(*hook, 0, 0, {{"loss", 1}});
  train_iter(*hook, 0, 1, {{"loss", 1}});
  EXPECT_TRUE(fs::exists(file()));  // opened at the first line: the file shows the run goes
  EXPECT_EQ(read_file(file()), "");
  train_iter(*hook, 0, 2, {{"loss", 1}});
  std::string expected = line(1) + line(2) + line(3);
  EXPECT_EQ(read_file(file()), expected);

  int iter = 3;
  for (rh_HookEvent flush_at : {RH_EVENT_AFTER_TRAIN_EPOCH, RH_EVENT_BEFORE_SAVE_CHECKPOINT,
                                RH_EVENT_AFTER_TRAIN, RH_EVENT_AFTER_RUN}) {
    train_iter(*hook, 0, iter, {{"loss", 1}});
    EXPECT_EQ(read_file(file()), expected) << "event " << flush_at;
    event_.metrics.clear();
    ASSERT_EQ(event_.send(*hook, flush_at), "");
    expected += line(++iter);
    EXPECT_EQ(read_file(file()), expected) << "event " << flush_at;
  }
  // A val (test) line is written with the lines before it.
  train_iter(*hook, 0, iter, {{"loss", 1}});
  eval_epoch(*hook, RH_EVENT_AFTER_VAL_EPOCH, 1, iter + 1, {{"accuracy", 1}});
  expected += line(iter + 1) +
              "{\"mode\": \"val\", \"epoch\": 1, \"iter\": " + std::to_string(iter + 1) +
              ", \"accuracy\": 1}\n";
  EXPECT_EQ(read_file(file()), expected);
}

// Lines are kept as numbers and formatted at the flush: lines with other
// names in between (a metric sent every other iteration, a name taken by a
// fixed key) are written as each came.
TEST_F(MetricsHookTest, KeptLinesWithDifferentNamesAreWrittenAsTheyCame) {
  auto hook = host_.create_hook("{type: metrics, flush_lines: 10, flush_seconds: 3600}");
  train_iter(*hook, 0, 0, {{"loss", 0.5}});
  train_iter(*hook, 0, 1, {{"loss", 0.25}, {"grad_norm", 3}});
  train_iter(*hook, 0, 2, {{"loss", 0.125}});
  train_iter(*hook, 0, 3, {{"loss", 1}, {"iter", 7}, {"lr", 0.1}});
  train_iter(*hook, 0, 4, {{"loss", 2}, {"grad_norm", 4}});
  EXPECT_EQ(read_file(file()), "");
  event_.metrics.clear();
  ASSERT_EQ(event_.send(*hook, RH_EVENT_AFTER_TRAIN_EPOCH), "");
  EXPECT_EQ(read_file(file()),
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 1, \"loss\": 0.5}\n"
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 2, \"loss\": 0.25, \"grad_norm\": 3}\n"
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 3, \"loss\": 0.125}\n"
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 4, \"loss\": 1, \"lr\": 0.1}\n"
            "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 5, \"loss\": 2, \"grad_norm\": 4}\n");
  EXPECT_THAT(host_.log_texts(), ::testing::Contains(HasSubstr("metric 'iter' is left out")));
  // After the flush, the same names again: still written as they came.
  train_iter(*hook, 0, 5, {{"loss", 3}, {"grad_norm", 5}});
  ASSERT_EQ(event_.send(*hook, RH_EVENT_AFTER_TRAIN), "");
  EXPECT_THAT(
      read_file(file()),
      ::testing::EndsWith(
          "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 6, \"loss\": 3, \"grad_norm\": 5}\n"));
}

TEST_F(MetricsHookTest, WritesKeptLinesOnceTheOldestIsFlushSecondsOld) {
  auto hook = host_.create_hook("{type: metrics, flush_lines: 1000, flush_seconds: 0}");
  train_iter(*hook, 0, 0, {{"loss", 1}});
  EXPECT_EQ(read_file(file()), "{\"mode\": \"train\", \"epoch\": 0, \"iter\": 1, \"loss\": 1}\n");
}

// The host destroys its hooks when a run fails (the error unwinding through
// the runner): the kept lines are written then. (End to end, with a hook
// failing mid-epoch: HookFlushTest.)
TEST_F(MetricsHookTest, DestroyingTheHookWritesTheKeptLines) {
  {
    auto hook = host_.create_hook("{type: metrics, flush_lines: 1000, flush_seconds: 3600}");
    for (int i = 0; i < 5; ++i) train_iter(*hook, 0, i, {{"loss", 1}});
    EXPECT_EQ(read_file(file()), "");
  }
  EXPECT_EQ(
      read_file(file()).size(),
      5 * std::string("{\"mode\": \"train\", \"epoch\": 0, \"iter\": 1, \"loss\": 1}\n").size());
}

TEST_F(MetricsHookTest, FileMayBeAbsoluteOrInASubdirectory) {
  const fs::path absolute = host_.dir / "elsewhere" / "m.jsonl";
  auto a = host_.create_hook("{type: metrics, file: " + absolute.string() + "}");
  auto b = host_.create_hook("{type: metrics, file: logs/run.jsonl}");
  train_iter(*a, 0, 0, {{"loss", 1}});
  train_iter(*b, 0, 0, {{"loss", 1}});
  EXPECT_TRUE(fs::exists(absolute));
  EXPECT_TRUE(fs::exists(host_.work_dir() / "logs" / "run.jsonl"));
}

TEST_F(MetricsHookTest, OnlyRankZeroWrites) {
  auto hook = host_.create_hook("{type: metrics}");
  event_.state.rank = 3;
  event_.state.world_size = 4;
  train_iter(*hook, 0, 0, {{"loss", 1}});
  eval_epoch(*hook, RH_EVENT_AFTER_VAL_EPOCH, 1, 1, {{"accuracy", 1}});
  EXPECT_FALSE(fs::exists(file()));
}

TEST_F(MetricsHookTest, AnUnwritableFileStopsTheRunWithItsPath) {
  fs::create_directories(file());  // a directory where the file should be
  auto hook = host_.create_hook("{type: metrics}");
  event_.metrics = {{"loss", 1}};
  const std::string error = event_.send(*hook, RH_EVENT_AFTER_TRAIN_ITER);
  EXPECT_THAT(error, HasSubstr("metrics: " + file().string() + ": cannot open: Is a directory"));
}

TEST_F(MetricsHookTest, RejectsBadConfig) {
  EXPECT_THAT(host_.create_hook_error("{type: metrics, interval: 0}"),
              HasSubstr("hooks.0.interval: must be >= 1, got 0"));
  EXPECT_THAT(host_.create_hook_error("{type: metrics, file: ''}"),
              HasSubstr("hooks.0.file: must not be empty"));
  EXPECT_THAT(host_.create_hook_error("{type: metrics, flush_lines: 0}"),
              HasSubstr("hooks.0.flush_lines: must be >= 1, got 0"));
  EXPECT_THAT(host_.create_hook_error("{type: metrics, flush_seconds: -1}"),
              HasSubstr("hooks.0.flush_seconds: must be between 0 and 3600"));
}

}  // namespace
}  // namespace rh::test
