// The host's own keys read once into typed structs (host/job/JobSettings.hpp):
// MMEngine's defaults where a key is absent, every key where it is written,
// and the rules between keys and --mode that the program checks before it
// launches a rank (check_run).
#include <gtest/gtest.h>

#include "config/YamlReader.hpp"
#include "host/config/ConfigTestUtil.hpp"
#include "job/JobSchema.hpp"
#include "job/JobSettings.hpp"

namespace rh::config {
namespace {

using test::messages;
using Messages = std::vector<std::string>;

const std::string kModel = "model: {type: mlp, in_features: 4, num_classes: 3}\n";

JobSettings settings(const std::string& yaml) {
  const NodePtr root = parse_yaml(yaml, "job.yaml");
  // read_settings takes a job the schema has passed: hold it to that here.
  EXPECT_EQ(messages(validate_job(*root)), Messages{}) << yaml;
  return read_settings(*root);
}

Messages run_errors(const std::string& yaml, RunMode mode) {
  const NodePtr root = parse_yaml(yaml, "job.yaml");
  EXPECT_EQ(messages(validate_job(*root)), Messages{}) << yaml;
  return messages(check_run(*root, mode));
}

TEST(JobSettingsTest, AbsentKeysTakeMmEnginesDefaults) {
  const JobSettings s = settings(kModel);
  EXPECT_FALSE(s.train.present);
  EXPECT_EQ(s.dist.backend, "auto");
  EXPECT_EQ(s.dist.timeout_s, 300.0);
  EXPECT_TRUE(s.dist.shared_memory);
  EXPECT_EQ(s.dist.keep_global_batch, KeepGlobalBatch::Accumulate);
  EXPECT_FALSE(s.dist.master_addr.has_value());
  EXPECT_FALSE(s.dist.master_port.has_value());
  EXPECT_EQ(s.seed.seed, 0u);
  EXPECT_FALSE(s.seed.diff_rank_seed);
  EXPECT_FALSE(s.seed.deterministic);
  EXPECT_FALSE(s.auto_scale_lr.enable);
  EXPECT_EQ(s.resume_dtype, ResumeDtype::Exact);
  EXPECT_EQ(s.optim.wrapper_type, "OptimWrapper");
  EXPECT_EQ(s.optim.optimizer_type, "SGD");
  EXPECT_EQ(s.optim.accumulative_counts, 1);
  EXPECT_EQ(s.sizes.num_classes, 3);
  EXPECT_EQ(s.sizes.train_batch_size, 1);
  EXPECT_EQ(s.sizes.train_block_size, 0);
}

// by_epoch follows max_epochs; val_interval is 1 epoch or 1000 iterations.
TEST(JobSettingsTest, TrainCfgDefaultsFollowWhatIsWritten) {
  JobSettings s = settings(kModel + "train_cfg: {max_epochs: 3}\n");
  EXPECT_TRUE(s.train.present);
  EXPECT_TRUE(s.train.by_epoch);
  EXPECT_EQ(s.train.max_epochs, 3);
  EXPECT_EQ(s.train.val_interval, 1);
  EXPECT_EQ(s.train.val_begin, 1);
  s = settings(kModel + "train_cfg: {max_iters: 50, val_begin: 2}\n");
  EXPECT_FALSE(s.train.by_epoch);
  EXPECT_EQ(s.train.max_iters, 50);
  EXPECT_EQ(s.train.val_interval, 1000);
  EXPECT_EQ(s.train.val_begin, 2);
}

TEST(JobSettingsTest, EveryWrittenKeyIsRead) {
  const JobSettings s = settings(
      kModel +
      "seed: 7\ndiff_rank_seed: true\ndeterministic: true\nresume_dtype: convert\n"
      "auto_scale_lr: {enable: true, base_batch_size: 64}\n"
      "optim_wrapper: {type: AmpOptimWrapper, accumulative_counts: 4, constructor: "
      "LearningRateDecayOptimWrapperConstructor, optimizer: {type: AdamW, lr: 0.1, amsgrad: "
      "true}, paramwise_cfg: {layer_decay_rate: 0.5}}\n"
      "dist: {backend: gloo, timeout_s: 12.5, shared_memory: false, master_addr: node0, "
      "master_port: 29600, keep_global_batch: batch_size}\n");
  EXPECT_EQ(s.seed.seed, 7u);
  EXPECT_TRUE(s.seed.diff_rank_seed);
  EXPECT_TRUE(s.seed.deterministic);
  EXPECT_EQ(s.resume_dtype, ResumeDtype::Convert);
  EXPECT_TRUE(s.auto_scale_lr.enable);
  EXPECT_EQ(s.auto_scale_lr.base_batch_size, 64);
  EXPECT_EQ(s.optim.wrapper_type, "AmpOptimWrapper");
  EXPECT_EQ(s.optim.optimizer_type, "AdamW");
  EXPECT_TRUE(s.optim.amsgrad);
  EXPECT_EQ(s.optim.accumulative_counts, 4);
  EXPECT_EQ(s.optim.constructor, "LearningRateDecayOptimWrapperConstructor");
  EXPECT_EQ(s.dist.backend, "gloo");
  EXPECT_EQ(s.dist.timeout_s, 12.5);
  EXPECT_FALSE(s.dist.shared_memory);
  EXPECT_EQ(s.dist.master_addr.value_or(""), "node0");
  EXPECT_EQ(s.dist.master_addr_at.str(), "job.yaml:8:75");
  EXPECT_EQ(s.dist.master_port.value_or(0), 29600);
  EXPECT_EQ(s.dist.master_port_at.str(), "job.yaml:8:95");
  EXPECT_EQ(s.dist.keep_global_batch, KeepGlobalBatch::BatchSize);
  EXPECT_EQ(s.dist.keep_global_batch_at.str(), "job.yaml:8:121");
}

// keep_global_batch: true is accumulate (the default), false keeps nothing.
TEST(JobSettingsTest, KeepGlobalBatchTakesABooleanOrAName) {
  EXPECT_EQ(settings(kModel + "dist: {keep_global_batch: true}\n").dist.keep_global_batch,
            KeepGlobalBatch::Accumulate);
  EXPECT_EQ(settings(kModel + "dist: {keep_global_batch: accumulate}\n").dist.keep_global_batch,
            KeepGlobalBatch::Accumulate);
  EXPECT_EQ(settings(kModel + "dist: {keep_global_batch: false}\n").dist.keep_global_batch,
            KeepGlobalBatch::No);
}

TEST(JobSettingsTest, TrainingNeedsTrainCfgWithItsLength) {
  EXPECT_EQ(run_errors(kModel, RunMode::Train),
            Messages{"job.yaml:1:1: train mode needs train_cfg (max_epochs or max_iters); --mode "
                     "val or --mode test evaluate without it"});
  EXPECT_EQ(run_errors(kModel + "train_cfg: {by_epoch: false}\n", RunMode::Train),
            Messages{"job.yaml:2:12: train_cfg: iteration-based training needs max_iters"});
  EXPECT_EQ(run_errors(kModel + "train_cfg: {by_epoch: true, max_iters: 4}\n", RunMode::Train),
            Messages{"job.yaml:2:12: train_cfg: by_epoch training needs max_epochs"});
  EXPECT_EQ(run_errors(kModel + "train_cfg: {max_iters: 4}\n", RunMode::Train), Messages{});
}

TEST(JobSettingsTest, AutoScaleLrNeedsItsBaseBatchSizeToTrain) {
  const std::string job = kModel + "train_cfg: {max_epochs: 1}\nauto_scale_lr: {enable: true}\n";
  EXPECT_EQ(run_errors(job, RunMode::Train),
            Messages{"job.yaml:3:16: auto_scale_lr: enable: true needs base_batch_size"});
  EXPECT_EQ(run_errors(job + "data: {val: {dataset: {type: synthetic_classification, num_samples: "
                             "4, num_features: 4, num_classes: 3}, batch_size: 2}}\n",
                       RunMode::Val),
            Messages{});
}

// val and test evaluate their own split, without train_cfg.
TEST(JobSettingsTest, EvaluatingNeedsItsSplitNotTrainCfg) {
  const std::string val =
      "data: {val: {dataset: {type: synthetic_classification, num_samples: 4, "
      "num_features: 4, num_classes: 3}, batch_size: 2}}\n";
  EXPECT_EQ(run_errors(kModel + val, RunMode::Val), Messages{});
  EXPECT_EQ(run_errors(kModel + val, RunMode::Test),
            Messages{"job.yaml:1:1: data: --mode test needs data.test"});
  EXPECT_EQ(run_errors(kModel, RunMode::Val),
            Messages{"job.yaml:1:1: data: --mode val needs data.val"});
  EXPECT_EQ(run_mode("train"), RunMode::Train);
  EXPECT_EQ(run_mode("val"), RunMode::Val);
  EXPECT_EQ(run_mode("test"), RunMode::Test);
}

}  // namespace
}  // namespace rh::config
