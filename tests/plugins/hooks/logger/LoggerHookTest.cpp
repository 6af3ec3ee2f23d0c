// The `logger` hook (plugins/hooks/logger): the exact train and evaluation
// lines it logs through the host, when it logs them, eta, and the progress
// bar it draws instead on a terminal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "common/PluginTestHost.hpp"

namespace rh::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LoggerHookTest : public ::testing::Test {
 protected:
  void SetUp() override { host_.load("rh_hook_logger"); }

  std::unique_ptr<host::HookInstance> create(const std::string& keys = "") {
    return host_.create_hook("{type: logger, progress_bar: false" + keys + "}");
  }

  // A by-epoch run: max_epochs epochs of `per_epoch` iterations.
  void epochs(int64_t max_epochs, int64_t per_epoch) {
    event_.state.max_epochs = max_epochs;
    event_.state.max_iters = max_epochs * per_epoch;
  }
  // after_train_iter of global iteration `iter` (0-based) with these metrics.
  void train_iter(host::HookInstance& hook, int64_t iter,
                  std::vector<std::pair<std::string, double>> metrics) {
    const int64_t per_epoch =
        event_.state.max_epochs > 0 ? event_.state.max_iters / event_.state.max_epochs : 0;
    event_.state.mode = RH_MODE_TRAIN;
    event_.state.iter = iter;
    event_.state.epoch = per_epoch > 0 ? iter / per_epoch : 0;
    event_.state.inner_iter = per_epoch > 0 ? iter % per_epoch : iter;
    event_.metrics = std::move(metrics);
    ASSERT_EQ(event_.send(hook, RH_EVENT_AFTER_TRAIN_ITER), "");
  }
  // A val loop of `batches` batches after `epochs_done` epochs / `iters_done` iterations.
  void val(host::HookInstance& hook, int64_t epochs_done, int64_t iters_done, int batches,
           std::vector<std::pair<std::string, double>> metrics, bool test = false) {
    event_.state.mode = test ? RH_MODE_TEST : RH_MODE_VAL;
    event_.state.epoch = epochs_done;
    event_.state.iter = iters_done;
    event_.metrics.clear();
    ASSERT_EQ(event_.send(hook, test ? RH_EVENT_BEFORE_TEST_EPOCH : RH_EVENT_BEFORE_VAL_EPOCH), "");
    for (int i = 0; i < batches; ++i) {
      event_.state.inner_iter = i;
      ASSERT_EQ(event_.send(hook, test ? RH_EVENT_AFTER_TEST_ITER : RH_EVENT_AFTER_VAL_ITER), "");
    }
    event_.state.inner_iter = batches;
    event_.metrics = std::move(metrics);
    ASSERT_EQ(event_.send(hook, test ? RH_EVENT_AFTER_TEST_EPOCH : RH_EVENT_AFTER_VAL_EPOCH), "");
  }

  PluginTestHost host_;
  Event event_;
};

TEST_F(LoggerHookTest, DescribesItselfAndSubscribesToWhatItUses) {
  host::Plugin& p = host_.load("rh_hook_logger");
  EXPECT_EQ(p.name, "rh_hook_logger");
  EXPECT_EQ(p.components.at(0).type_name, "logger");
  auto hook = create();
  EXPECT_EQ(hook->priority(), RH_PRIORITY_BELOW_NORMAL);
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_TRAIN_ITER));
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_VAL_EPOCH));
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_TEST_EPOCH));
  EXPECT_FALSE(hook->wants(RH_EVENT_BEFORE_TRAIN_ITER));
  EXPECT_FALSE(hook->wants(RH_EVENT_BEFORE_SAVE_CHECKPOINT));
}

TEST_F(LoggerHookTest, LogsEveryIntervalAndTheLastIterationOfAnEpoch) {
  auto hook = create(", interval: 2");
  epochs(2, 5);
  for (int64_t i = 0; i < 10; ++i) {
    train_iter(*hook, i,
               {{"loss", 1.0 / static_cast<double>(i + 1)},
                {"lr", 0.002},
                {"time", 0.5},
                {"data_time", 0.125},
                {"memory_mb", 200.0 + static_cast<double>(i)}});
  }
  EXPECT_THAT(
      host_.log_texts(),
      ElementsAre(
          // loss: mean of 1 and 1/2; eta: 0.5 s x 8 iterations left
          "Epoch(train) [1][2/5]  lr: 2.0000e-03  eta: 0:00:04  time: 0.5000  data_time: 0.1250  "
          "loss: 0.7500  memory: 201",
          "Epoch(train) [1][4/5]  lr: 2.0000e-03  eta: 0:00:03  time: 0.5000  data_time: 0.1250  "
          "loss: 0.2917  memory: 203",
          // the end of the epoch, off-interval: the window is one iteration
          "Epoch(train) [1][5/5]  lr: 2.0000e-03  eta: 0:00:02  time: 0.5000  data_time: 0.1250  "
          "loss: 0.2000  memory: 204",
          "Epoch(train) [2][2/5]  lr: 2.0000e-03  eta: 0:00:01  time: 0.5000  data_time: 0.1250  "
          "loss: 0.1548  memory: 206",
          "Epoch(train) [2][4/5]  lr: 2.0000e-03  eta: 0:00:00  time: 0.5000  data_time: 0.1250  "
          "loss: 0.1181  memory: 208",
          "Epoch(train) [2][5/5]  lr: 2.0000e-03  eta: 0:00:00  time: 0.5000  data_time: 0.1250  "
          "loss: 0.1000  memory: 209"));
}

TEST_F(LoggerHookTest, PrintsEveryMetricInTheHostsOrderAndPadsTheCounter) {
  auto hook = create(", interval: 40");
  epochs(3, 128);
  // The runner's order: loss, lr, grad_norm, time, data_time, memory_mb, then
  // metrics put by plugins.
  for (int64_t i = 128; i < 168; ++i)
    train_iter(*hook, i,
               {{"loss", 0.4321},
                {"lr", 2e-3},
                {"grad_norm", 1.5},
                {"time", 0.0123},
                {"data_time", 0.0011},
                {"memory_mb", 211.6},
                {"loss_scale", 65536},
                {"base_lr", 0.1}});
  EXPECT_THAT(host_.log_texts(),
              ElementsAre("Epoch(train) [2][ 40/128]  lr: 2.0000e-03  base_lr: 1.0000e-01  eta: "
                          "0:00:02  time: 0.0123  data_time: 0.0011  loss: 0.4321  grad_norm: "
                          "1.5000  loss_scale: 65536.0000  memory: 212"));
}

// An iteration only keeps its values; they are averaged at the line (and
// every 64 iterations): a line over 100 iterations, with a metric sent in
// only some of them, averages each metric over the iterations that sent it.
TEST_F(LoggerHookTest, AveragesOverTheWholeIntervalWhateverTheMetricsEachIterationSent) {
  auto hook = create(", interval: 100");
  epochs(2, 100);
  for (int64_t i = 0; i < 100; ++i) {
    std::vector<std::pair<std::string, double>> metrics = {
        {"loss", static_cast<double>(i)},
        {"lr", 1e-3 + 1e-5 * static_cast<double>(i)},
        {"time", 0.01}};
    if (i >= 10 && i < 20) metrics.push_back({"aux", static_cast<double>(i - 9)});
    metrics.push_back({"memory_mb", 100.0 + static_cast<double>(i % 70)});
    train_iter(*hook, i, metrics);
  }
  // loss: the mean of 0..99; lr: the last; aux: the mean of 1..10; memory:
  // the largest; eta: 0.01 s x the 100 iterations left.
  EXPECT_THAT(host_.log_texts(),
              ElementsAre("Epoch(train) [1][100/100]  lr: 1.9900e-03  eta: 0:00:01  time: 0.0100  "
                          "loss: 49.5000  aux: 5.5000  memory: 169"));
}

// The kept values are added in the order they came: a mean whose value
// depends on that order (1e16 - 1e16 + 1 is 1; 1 - 1e16 + 1e16 is 0 in doubles).
TEST_F(LoggerHookTest, AddsTheKeptValuesInTheOrderTheyCame) {
  auto hook = create(", interval: 3");
  epochs(1, 3);
  train_iter(*hook, 0, {{"loss", 1e16}, {"time", 0.01}});
  train_iter(*hook, 1, {{"loss", -1e16}, {"time", 0.01}});
  train_iter(*hook, 2, {{"loss", 1.0}, {"time", 0.01}});
  EXPECT_THAT(host_.log_texts(),
              ElementsAre("Epoch(train) [1][3/3]  eta: 0:00:00  time: 0.0100  loss: 0.3333"));
}

TEST_F(LoggerHookTest, ShowsTheJobsThroughputOverTheIntervalAndTheCurrentRss) {
  auto hook = create(", interval: 2");
  epochs(1, 2);
  // 8 samples per rank in 0.1 s, then in 0.3 s: the job of 2 ranks did 32
  // in 0.4 s = 80 samples/s (a mean of the rates would say 107); the
  // per-rank figures are not printed.
  train_iter(*hook, 0,
             {{"loss", 1.0},
              {"time", 0.1},
              {"memory_mb", 300},
              {"samples_per_s", 80},
              {"job_samples_per_s", 160},
              {"rss_mb", 250}});
  train_iter(*hook, 1,
             {{"loss", 1.0},
              {"time", 0.3},
              {"memory_mb", 301},
              {"samples_per_s", 8 / 0.3},
              {"job_samples_per_s", 16 / 0.3},
              {"rss_mb", 240}});
  EXPECT_THAT(host_.log_texts(),
              ElementsAre("Epoch(train) [1][2/2]  eta: 0:00:00  time: 0.2000  samples/s: 80  "
                          "loss: 1.0000  memory: 301  rss: 240"));
}

TEST_F(LoggerHookTest, IterationBasedRunsAreLabelledByIteration) {
  auto hook = create(", interval: 100");
  event_.state.max_epochs = 0;
  event_.state.max_iters = 1000;
  for (int64_t i = 0; i < 1000; ++i) train_iter(*hook, i, {{"loss", 0.5}, {"time", 100.0}});
  const auto lines = host_.log_texts();
  ASSERT_EQ(lines.size(), 10u);
  // eta: 100 s x 900 iterations = 1 day, 1:00:00
  EXPECT_EQ(lines[0], "Iter(train) [ 100/1000]  eta: 1 day, 1:00:00  time: 100.0000  loss: 0.5000");
  EXPECT_EQ(lines[9], "Iter(train) [1000/1000]  eta: 0:00:00  time: 100.0000  loss: 0.5000");
  val(*hook, 0, 1000, 32, {{"accuracy/top1", 91.2}});
  EXPECT_EQ(host_.log_texts().back(), "Iter(val) [32/32]  accuracy/top1: 91.2000");
}

TEST_F(LoggerHookTest, LogMetricByEpochFalseLabelsByIteration) {
  auto hook = create(", interval: 3, log_metric_by_epoch: false");
  epochs(2, 3);
  for (int64_t i = 0; i < 6; ++i) train_iter(*hook, i, {{"loss", 1}, {"time", 1}});
  val(*hook, 2, 6, 4, {{"accuracy", 50}});
  EXPECT_THAT(host_.log_texts(),
              ElementsAre("Iter(train) [3/6]  eta: 0:00:03  time: 1.0000  loss: 1.0000",
                          "Iter(train) [6/6]  eta: 0:00:00  time: 1.0000  loss: 1.0000",
                          "Iter(val) [4/4]  accuracy: 50.0000"));
}

TEST_F(LoggerHookTest, WithoutATimeMetricEtaComesFromTheClock) {
  auto hook = create(", interval: 1");
  epochs(1, 4);
  train_iter(*hook, 0, {{"loss", 1}});
  train_iter(*hook, 1, {{"loss", 1}});
  const auto lines = host_.log_texts();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "Epoch(train) [1][1/4]  loss: 1.0000");  // not known yet
  EXPECT_EQ(lines[1], "Epoch(train) [1][2/4]  eta: 0:00:00  loss: 1.0000");
}

TEST_F(LoggerHookTest, LogsEvaluationResultsWithAllMetrics) {
  auto hook = create();
  epochs(5, 10);
  val(*hook, 2, 20, 32, {{"accuracy/top1", 91.2}, {"accuracy/top5", 99.5}, {"loss", 0.3}});
  val(*hook, 5, 50, 8, {{"accuracy/top1", 92}}, /*test=*/true);
  EXPECT_THAT(host_.log_texts(),
              ElementsAre("Epoch(val) [2][32/32]  accuracy/top1: 91.2000  accuracy/top5: 99.5000  "
                          "loss: 0.3000",
                          "Epoch(test) [5][8/8]  accuracy/top1: 92.0000"));
}

TEST_F(LoggerHookTest, AnEvaluationOnlyJobHasNoEpoch) {
  auto hook = create();
  val(*hook, 0, 0, 3, {{"accuracy", 75}});
  EXPECT_THAT(host_.log_texts(), ElementsAre("Epoch(val) [3/3]  accuracy: 75.0000"));
}

TEST_F(LoggerHookTest, OnlyRankZeroLogs) {
  auto hook = create(", interval: 1");
  epochs(1, 2);
  event_.state.rank = 1;
  event_.state.world_size = 2;
  train_iter(*hook, 0, {{"loss", 1}});
  val(*hook, 1, 2, 1, {{"accuracy", 1}});
  EXPECT_TRUE(host_.log_texts().empty());
}

TEST_F(LoggerHookTest, RejectsBadConfig) {
  EXPECT_THAT(host_.create_hook_error("{type: logger, interval: 0}"),
              HasSubstr("hooks.0.interval: must be >= 1, got 0"));
  EXPECT_THAT(host_.create_hook_error("{type: logger, progress_bar: sometimes}"),
              HasSubstr("hooks.0.progress_bar: expected auto, true or false, got 'sometimes'"));
  EXPECT_THAT(host_.create_hook_error("{type: logger, intervals: 5}"), HasSubstr("intervals"));
}

// Captures what is written to file descriptor 1 while it lives.
class StdoutCapture {
 public:
  StdoutCapture() : file_(std::tmpfile()) {
    std::fflush(stdout);
    saved_ = ::dup(1);
    ::dup2(::fileno(file_), 1);
  }
  std::string finish() {
    std::fflush(stdout);
    ::dup2(saved_, 1);
    ::close(saved_);
    std::string out;
    std::rewind(file_);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) out.append(buf, n);
    std::fclose(file_);
    return out;
  }

 private:
  FILE* file_;
  int saved_ = -1;
};

TEST_F(LoggerHookTest, DrawsAProgressBarInsteadOfTrainLines) {
  auto hook = host_.create_hook("{type: logger, interval: 2, progress_bar: true}");
  epochs(1, 4);
  StdoutCapture capture;
  for (int64_t i = 0; i < 4; ++i) train_iter(*hook, i, {{"loss", 0.5}, {"lr", 0.1}, {"time", 2}});
  val(*hook, 1, 4, 2, {{"accuracy", 80}});
  const std::string out = capture.finish();
  // No train lines in the log, the val line still there.
  EXPECT_THAT(host_.log_texts(), ElementsAre("Epoch(val) [1][2/2]  accuracy: 80.0000"));
  // One terminal line, redrawn with \r, finished at the end of the epoch.
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front(), '\r');
  EXPECT_EQ(out.back(), '\n');
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  const std::string last = out.substr(out.rfind('\r'));
  EXPECT_EQ(last,
            "\rEpoch(train) [1][4/4] [==============================] 100%  lr: 1.0000e-01  "
            "eta: 0:00:00  time: 2.0000  loss: 0.5000\x1b[K\n");
  EXPECT_THAT(out, HasSubstr("\rEpoch(train) [1][2/4] [===============>              ]  50%  "
                             "lr: 1.0000e-01  eta: 0:00:04  time: 2.0000  loss: 0.5000\x1b[K"));
}

}  // namespace
}  // namespace rh::test
