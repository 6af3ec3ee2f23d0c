// The `checkpoint` hook (plugins/hooks/checkpoint): which checkpoints it asks
// the host to save and remove (a recording Checkpoint_Save/Remove that runs
// before_save_checkpoint like the host's protocol), and the state it keeps in
// them so that a resumed run goes on with the same best and kept list.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/PluginTestHost.hpp"

namespace rh::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Calls = std::vector<std::string>;

class CheckpointHookTest : public ::testing::Test {
 protected:
  void SetUp() override { host_.load("rh_hook_checkpoint"); }

  std::unique_ptr<host::HookInstance> create(const std::string& keys = "") {
    auto hook = host_.create_hook("{type: checkpoint" + keys + "}");
    host_.checkpoints.hook = hook.get();
    return hook;
  }
  std::string send(host::HookInstance& hook, rh_HookEvent event) {
    host_.checkpoints.state = event_.state;
    return event_.send(hook, event);
  }

  // A by-epoch run of `max_epochs` epochs of `per_epoch` iterations.
  void epochs(int64_t max_epochs, int64_t per_epoch = 10) {
    event_.state.max_epochs = max_epochs;
    event_.state.max_iters = max_epochs * per_epoch;
    per_epoch_ = per_epoch;
  }
  // Train epoch `epoch` (0-based) ends, as the runner says it.
  std::string end_epoch(host::HookInstance& hook, int64_t epoch) {
    event_.state.mode = RH_MODE_TRAIN;
    event_.state.epoch = epoch;
    event_.state.iter = (epoch + 1) * per_epoch_;
    event_.state.inner_iter = per_epoch_;
    event_.metrics.clear();
    return send(hook, RH_EVENT_AFTER_TRAIN_EPOCH);
  }
  // Train iteration `iter` (0-based) ran.
  std::string end_iter(host::HookInstance& hook, int64_t iter) {
    event_.state.mode = RH_MODE_TRAIN;
    event_.state.epoch = 0;
    event_.state.iter = iter;
    event_.state.inner_iter = iter;
    event_.metrics = {{"loss", 1.0}};
    return send(hook, RH_EVENT_AFTER_TRAIN_ITER);
  }
  // A val epoch after `epochs_done` epochs (by epoch) or `iters_done` iterations.
  std::string val(host::HookInstance& hook, int64_t epochs_done, int64_t iters_done,
                  std::vector<std::pair<std::string, double>> metrics) {
    event_.state.mode = RH_MODE_VAL;
    event_.state.epoch = epochs_done;
    event_.state.iter = iters_done;
    event_.state.inner_iter = 4;
    event_.metrics = std::move(metrics);
    return send(hook, RH_EVENT_AFTER_VAL_EPOCH);
  }
  // Train epoch `epoch` ends and is validated with `metric` = `score`.
  void epoch_with_val(host::HookInstance& hook, int64_t epoch, const std::string& metric,
                      double score) {
    ASSERT_EQ(end_epoch(hook, epoch), "");
    ASSERT_EQ(val(hook, epoch + 1, (epoch + 1) * per_epoch_, {{metric, score}}), "");
  }
  // The hook's state saved in checkpoint `name`, blob by blob.
  std::map<std::string, std::string> state_in(const std::string& name) {
    std::map<std::string, std::string> out;
    for (const auto& [key, entry] : host_.checkpoints.states.at(name).entries)
      out[key] = std::string(entry.bytes.begin(), entry.bytes.end());
    return out;
  }
  // Resumes `hook` from the state saved in checkpoint `name`.
  std::string load(host::HookInstance& hook, const std::string& name) {
    rh_StateDict state = host_.checkpoints.states.at(name);
    event_.checkpoint = &state;
    const std::string error = send(hook, RH_EVENT_AFTER_LOAD_CHECKPOINT);
    event_.checkpoint = nullptr;
    return error;
  }
  const Calls& calls() const { return host_.checkpoints.calls; }

  PluginTestHost host_;
  Event event_;
  int64_t per_epoch_ = 10;
};

TEST_F(CheckpointHookTest, DescribesItselfAndSubscribesToWhatItUses) {
  EXPECT_EQ(host_.load("rh_hook_checkpoint").components.at(0).type_name, "checkpoint");
  auto by_epoch = create();
  EXPECT_EQ(by_epoch->priority(), RH_PRIORITY_VERY_LOW);
  EXPECT_TRUE(by_epoch->wants(RH_EVENT_AFTER_TRAIN_EPOCH));
  EXPECT_FALSE(by_epoch->wants(RH_EVENT_AFTER_TRAIN_ITER));
  EXPECT_FALSE(by_epoch->wants(RH_EVENT_AFTER_VAL_EPOCH));
  EXPECT_TRUE(by_epoch->wants(RH_EVENT_BEFORE_SAVE_CHECKPOINT));
  EXPECT_TRUE(by_epoch->wants(RH_EVENT_AFTER_LOAD_CHECKPOINT));
  EXPECT_FALSE(by_epoch->wants(RH_EVENT_AFTER_SAVE_CHECKPOINT));
  auto by_iter = create(", by_epoch: false, save_best: acc");
  EXPECT_TRUE(by_iter->wants(RH_EVENT_AFTER_TRAIN_ITER));
  EXPECT_FALSE(by_iter->wants(RH_EVENT_AFTER_TRAIN_EPOCH));
  EXPECT_TRUE(by_iter->wants(RH_EVENT_AFTER_VAL_EPOCH));
}

TEST_F(CheckpointHookTest, SavesEveryIntervalEpochsAndTheLast) {
  auto hook = create(", interval: 2");
  epochs(5);
  for (int64_t e = 0; e < 5; ++e) ASSERT_EQ(end_epoch(*hook, e), "");
  EXPECT_THAT(calls(), ElementsAre("save epoch_2", "save epoch_4", "save epoch_5"));
}

TEST_F(CheckpointHookTest, SaveLastFalseSkipsTheOffIntervalEnd) {
  auto hook = create(", interval: 2, save_last: false");
  epochs(5);
  for (int64_t e = 0; e < 5; ++e) ASSERT_EQ(end_epoch(*hook, e), "");
  EXPECT_THAT(calls(), ElementsAre("save epoch_2", "save epoch_4"));
}

TEST_F(CheckpointHookTest, SaveBeginDelaysTheFirstSave) {
  auto hook = create(", interval: 2, save_begin: 3, save_last: false");
  epochs(8);
  for (int64_t e = 0; e < 8; ++e) ASSERT_EQ(end_epoch(*hook, e), "");
  EXPECT_THAT(calls(), ElementsAre("save epoch_3", "save epoch_5", "save epoch_7"));
}

TEST_F(CheckpointHookTest, IntervalMinusOneSavesOnlyTheLast) {
  auto hook = create(", interval: -1");
  epochs(3);
  for (int64_t e = 0; e < 3; ++e) ASSERT_EQ(end_epoch(*hook, e), "");
  EXPECT_THAT(calls(), ElementsAre("save epoch_3"));
}

TEST_F(CheckpointHookTest, CountsIterationsWhenNotByEpoch) {
  auto hook = create(", by_epoch: false, interval: 3");
  event_.state.max_epochs = 0;
  event_.state.max_iters = 10;
  ASSERT_EQ(send(*hook, RH_EVENT_BEFORE_TRAIN), "");
  for (int64_t i = 0; i < 10; ++i) ASSERT_EQ(end_iter(*hook, i), "");
  EXPECT_THAT(calls(), ElementsAre("save iter_3", "save iter_6", "save iter_9", "save iter_10"));
}

TEST_F(CheckpointHookTest, ByEpochInAnIterationBasedRunIsAnError) {
  auto hook = create();
  event_.state.max_epochs = 0;
  event_.state.max_iters = 100;
  EXPECT_THAT(send(*hook, RH_EVENT_BEFORE_TRAIN),
              HasSubstr("hooks.0: by_epoch is true, but the train loop is iteration based "
                        "(max_epochs is 0): set by_epoch: false"));
}

TEST_F(CheckpointHookTest, MaxKeepRemovesTheOldestAfterSaving) {
  auto hook = create(", max_keep_ckpts: 2");
  epochs(4);
  for (int64_t e = 0; e < 4; ++e) ASSERT_EQ(end_epoch(*hook, e), "");
  EXPECT_THAT(calls(), ElementsAre("save epoch_1", "save epoch_2", "save epoch_3", "remove epoch_1",
                                   "save epoch_4", "remove epoch_2"));
  EXPECT_EQ(host_.checkpoints.existing, (std::set<std::string>{"epoch_3", "epoch_4"}));
}

TEST_F(CheckpointHookTest, SavesTheBestAndRemovesThePreviousBest) {
  auto hook = create(", save_best: accuracy/top1");
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_VAL_EPOCH));
  epochs(4);
  epoch_with_val(*hook, 0, "accuracy/top1", 0.5);
  epoch_with_val(*hook, 1, "accuracy/top1", 0.4);  // worse: nothing
  epoch_with_val(*hook, 2, "accuracy/top1", 0.7);
  epoch_with_val(*hook, 3, "accuracy/top1", 0.7);  // equal: not better
  EXPECT_THAT(calls(),
              ElementsAre("save epoch_1", "save best_accuracy_top1_epoch_1", "save epoch_2",
                          "save epoch_3", "save best_accuracy_top1_epoch_3",
                          "remove best_accuracy_top1_epoch_1", "save epoch_4"));
  EXPECT_THAT(host_.log_texts(),
              ElementsAre("new best accuracy/top1 = 0.5: saved best_accuracy_top1_epoch_1",
                          "new best accuracy/top1 = 0.7: saved best_accuracy_top1_epoch_3 (was "
                          "0.5, best_accuracy_top1_epoch_1)"));
}

TEST_F(CheckpointHookTest, LossLikeMetricsAreBetterWhenLess) {
  auto hook = create(", interval: -1, save_last: false, save_best: val/loss");
  epochs(3);
  epoch_with_val(*hook, 0, "val/loss", 0.5);
  epoch_with_val(*hook, 1, "val/loss", 0.6);
  epoch_with_val(*hook, 2, "val/loss", 0.2);
  EXPECT_THAT(calls(), ElementsAre("save best_val_loss_epoch_1", "save best_val_loss_epoch_3",
                                   "remove best_val_loss_epoch_1"));
}

TEST_F(CheckpointHookTest, AnExplicitRuleWins) {
  auto hook = create(", interval: -1, save_last: false, save_best: error, rule: less");
  epochs(2);
  epoch_with_val(*hook, 0, "error", 5);
  epoch_with_val(*hook, 1, "error", 3);
  EXPECT_THAT(calls(), ElementsAre("save best_error_epoch_1", "save best_error_epoch_2",
                                   "remove best_error_epoch_1"));
}

TEST_F(CheckpointHookTest, BestByIterationAndAuto) {
  auto hook = create(", by_epoch: false, interval: -1, save_last: false, save_best: auto");
  event_.state.max_epochs = 0;
  event_.state.max_iters = 20;
  for (int64_t i = 0; i < 10; ++i) ASSERT_EQ(end_iter(*hook, i), "");
  ASSERT_EQ(val(*hook, 0, 10, {{"mIoU", 0.3}, {"loss", 9}}), "");
  for (int64_t i = 10; i < 20; ++i) ASSERT_EQ(end_iter(*hook, i), "");
  ASSERT_EQ(val(*hook, 0, 20, {{"mIoU", 0.35}, {"loss", 1}}), "");
  EXPECT_THAT(calls(), ElementsAre("save best_mIoU_iter_10", "save best_mIoU_iter_20",
                                   "remove best_mIoU_iter_10"));
}

TEST_F(CheckpointHookTest, MaxKeepNeverRemovesTheBest) {
  auto hook = create(", max_keep_ckpts: 1, save_best: acc");
  epochs(3);
  epoch_with_val(*hook, 0, "acc", 0.9);
  epoch_with_val(*hook, 1, "acc", 0.1);
  epoch_with_val(*hook, 2, "acc", 0.2);
  EXPECT_THAT(calls(), ElementsAre("save epoch_1", "save best_acc_epoch_1", "save epoch_2",
                                   "remove epoch_1", "save epoch_3", "remove epoch_2"));
  EXPECT_EQ(host_.checkpoints.existing, (std::set<std::string>{"best_acc_epoch_1", "epoch_3"}));
}

TEST_F(CheckpointHookTest, AMissingMetricIsAnErrorListingTheOthers) {
  auto hook = create(", save_best: acc");
  epochs(1);
  ASSERT_EQ(end_epoch(*hook, 0), "");
  EXPECT_THAT(val(*hook, 1, 10, {{"accuracy/top1", 0.5}, {"loss", 1}}),
              HasSubstr("hooks.0.save_best: metric 'acc' is not among the metrics of this val "
                        "epoch (accuracy/top1, loss)"));
}

TEST_F(CheckpointHookTest, NoMetricsOrNoTrainingMeansNoBest) {
  auto hook = create(", save_best: acc");
  ASSERT_EQ(val(*hook, 0, 0, {{"acc", 0.5}}), "");  // evaluation-only job
  epochs(1);
  ASSERT_EQ(end_epoch(*hook, 0), "");
  ASSERT_EQ(val(*hook, 1, 10, {}), "");
  EXPECT_THAT(calls(), ElementsAre("save epoch_1"));
  EXPECT_THAT(host_.log_texts(RH_LOG_WARN),
              ElementsAre(HasSubstr("this val epoch reported no metrics")));
}

TEST_F(CheckpointHookTest, ItsStateIsInEveryCheckpointItSaves) {
  auto hook = create(", max_keep_ckpts: 2, save_best: acc");
  epochs(3);
  epoch_with_val(*hook, 0, "acc", 0.5);
  epoch_with_val(*hook, 1, "acc", 0.75);
  ASSERT_EQ(end_epoch(*hook, 2), "");
  // Each checkpoint's state already counts that checkpoint.
  EXPECT_EQ(state_in("epoch_1"), (std::map<std::string, std::string>{
                                     {"version", "1"}, {"kept_checkpoints", "epoch_1"}}));
  EXPECT_EQ(state_in("best_acc_epoch_2"),
            (std::map<std::string, std::string>{{"version", "1"},
                                                {"kept_checkpoints", "epoch_1\nepoch_2"},
                                                {"best_metric", "acc"},
                                                {"best_rule", "greater"},
                                                {"best_score", "0.75"},
                                                {"best_checkpoint", "best_acc_epoch_2"}}));
  EXPECT_EQ(state_in("epoch_3").at("kept_checkpoints"), "epoch_2\nepoch_3");
}

TEST_F(CheckpointHookTest, AResumedRunKeepsTheBestAndTheKeptList) {
  {
    auto first = create(", max_keep_ckpts: 2, save_best: acc");
    epochs(6);
    epoch_with_val(*first, 0, "acc", 0.5);
    epoch_with_val(*first, 1, "acc", 0.8);
    epoch_with_val(*first, 2, "acc", 0.6);
  }
  // The run dies and resumes from epoch_3, whose state says: kept epoch_2
  // and epoch_3; the best is 0.8, in best_acc_epoch_2.
  host_.checkpoints.calls.clear();
  auto resumed = create(", max_keep_ckpts: 2, save_best: acc");
  epochs(6);
  ASSERT_EQ(load(*resumed, "epoch_3"), "");
  epoch_with_val(*resumed, 3, "acc", 0.7);  // not better than 0.8
  epoch_with_val(*resumed, 4, "acc", 0.9);
  EXPECT_THAT(calls(),
              ElementsAre("save epoch_4", "remove epoch_2", "save epoch_5", "remove epoch_3",
                          "save best_acc_epoch_5", "remove best_acc_epoch_2"));
}

TEST_F(CheckpointHookTest, ARestoredBestOfAnotherMetricIsNotUsed) {
  {
    auto first = create(", save_best: acc");
    epochs(2);
    epoch_with_val(*first, 0, "acc", 0.9);
  }
  host_.checkpoints.calls.clear();
  auto resumed = create(", save_best: loss");
  epochs(2);
  ASSERT_EQ(load(*resumed, "best_acc_epoch_1"), "");
  epoch_with_val(*resumed, 1, "loss", 3.0);
  EXPECT_THAT(calls(), ElementsAre("save epoch_2", "save best_loss_epoch_2"));  // acc's best stays
  EXPECT_THAT(host_.log_texts(RH_LOG_WARN),
              ElementsAre("the checkpoint's best (best_acc_epoch_1) is for acc (greater); this "
                          "job tracks loss (less): starting a new best, best_acc_epoch_1 is "
                          "kept"));
}

TEST_F(CheckpointHookTest, AnEmptyOrForeignStateIsHandled) {
  auto hook = create(", max_keep_ckpts: 1");
  epochs(2);
  rh_StateDict empty;
  event_.checkpoint = &empty;
  EXPECT_EQ(send(*hook, RH_EVENT_AFTER_LOAD_CHECKPOINT), "");  // no state for this hook
  rh_StateDict newer;
  newer.entries["version"].bytes = {'2'};
  event_.checkpoint = &newer;
  EXPECT_THAT(send(*hook, RH_EVENT_AFTER_LOAD_CHECKPOINT),
              HasSubstr("the checkpoint's hook state has version '2', this hook reads version 1"));
  event_.checkpoint = nullptr;
}

TEST_F(CheckpointHookTest, AFailedSaveStopsTheRunAndChangesNothing) {
  auto hook = create(", max_keep_ckpts: 1");
  epochs(3);
  ASSERT_EQ(end_epoch(*hook, 0), "");
  host_.checkpoints.fail_save = {"epoch_2"};
  EXPECT_THAT(end_epoch(*hook, 1), HasSubstr("disk full saving epoch_2"));
  ASSERT_EQ(end_epoch(*hook, 2), "");
  // epoch_1 was not removed for the failed epoch_2, and epoch_2 is not in the
  // list: epoch_3 replaces epoch_1.
  EXPECT_THAT(calls(),
              ElementsAre("save epoch_1", "save epoch_2", "save epoch_3", "remove epoch_1"));
}

TEST_F(CheckpointHookTest, AFailedRemovalIsLoggedAndRetried) {
  auto hook = create(", max_keep_ckpts: 1");
  epochs(4);
  ASSERT_EQ(end_epoch(*hook, 0), "");
  host_.checkpoints.fail_remove = {"epoch_1"};
  ASSERT_EQ(end_epoch(*hook, 1), "");
  EXPECT_THAT(host_.log_texts(RH_LOG_WARN),
              ElementsAre("could not remove checkpoint epoch_1: cannot remove epoch_1"));
  host_.checkpoints.fail_remove.clear();
  host_.checkpoints.existing.erase("epoch_2");  // already gone: NOT_FOUND is fine
  ASSERT_EQ(end_epoch(*hook, 2), "");
  EXPECT_THAT(calls(), ElementsAre("save epoch_1", "save epoch_2", "remove epoch_1", "save epoch_3",
                                   "remove epoch_1", "remove epoch_2"));
  EXPECT_EQ(state_in("epoch_3").at("kept_checkpoints"), "epoch_3");
}

TEST_F(CheckpointHookTest, RejectsBadConfig) {
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint, interval: 0}"),
              HasSubstr("hooks.0.interval: must be >= 1, or -1 for no regular saves; got 0"));
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint, max_keep_ckpts: 0}"),
              HasSubstr("hooks.0.max_keep_ckpts: must be >= 1, or -1 to keep every checkpoint"));
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint, save_best: acc, rule: bigger}"),
              HasSubstr("hooks.0.rule: expected greater or less, got 'bigger'"));
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint, rule: less}"),
              HasSubstr("hooks.0.rule: has no effect without save_best"));
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint, save_begin: -1}"),
              HasSubstr("hooks.0.save_begin: must be >= 0, got -1"));
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint, max_keep: 3}"), HasSubstr("max_keep"));
}

TEST_F(CheckpointHookTest, NeedsAHostWithCheckpointSave) {
  host_.services.mutable_api().Checkpoint_Save = nullptr;
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint}"),
              HasSubstr("this host does not provide Checkpoint_Save (an ABI 1.1 entry; the host "
                        "has ABI 1." +
                        std::to_string(RH_ABI_VERSION_MINOR) + ")"));
  host_.services.mutable_api().struct_size = RH_STRUCT_SIZE(rh_HostApi, CommWork_Destroy);
  EXPECT_THAT(host_.create_hook_error("{type: checkpoint}"),
              HasSubstr("does not provide Checkpoint_Save"));
}

}  // namespace
}  // namespace rh::test
