#include <gtest/gtest.h>

#include "config/JobLoader.hpp"
#include "config/YamlReader.hpp"
#include "host/config/ConfigTestUtil.hpp"
#include "job/JobSchema.hpp"

namespace rh::config {
namespace {

using test::data_path;
using test::messages;
using test::TempDir;
using Messages = std::vector<std::string>;

Messages check(const std::string& text) {
  return messages(validate(*parse_yaml(text, "job.yaml"), job_schema()));
}

TEST(JobSchemaTest, TheFixtureJobIsValid) {
  const Job job = load_job(data_path("jobs/mlp_ddp.yaml"), {});
  EXPECT_EQ(messages(validate(*job.root, job_schema())), Messages{});
}

TEST(JobSchemaTest, EveryHostKeyAccepted) {
  EXPECT_EQ(
      check("work_dir: out\n"
            "seed: 3\n"
            "diff_rank_seed: true\n"
            "deterministic: false\n"
            "log_level: debug\n"
            "model: {type: mlp, in_features: 4, num_classes: 2, hidden: [1]}\n"
            "data:\n"
            "  train: {dataset: {type: synthetic_classification, num_samples: 8, num_features: 4, "
            "num_classes: 2}, batch_size: 8}\n"
            "  val: {dataset: {type: synthetic_classification, num_samples: 8, num_features: 4, "
            "num_classes: 2}, batch_size: 8}\n"
            "  test: {dataset: {type: synthetic_classification, num_samples: 8, num_features: 4, "
            "num_classes: 2}, batch_size: 8}\n"
            "optim_wrapper:\n"
            "  optimizer: {type: SGD, lr: 0.1}\n"
            "  paramwise_cfg: {norm_decay_mult: 0}\n"
            "  clip_grad: null\n"
            "  accumulative_counts: 2\n"
            "param_scheduler: {type: StepLR, step_size: 3}\n"
            "auto_scale_lr: {enable: true, base_batch_size: 256}\n"
            "train_cfg: {by_epoch: false, max_iters: 1000, val_interval: 100, val_begin: 1}\n"
            "val_cfg:\n"
            "test_cfg: {type: TestLoop}\n"
            "strategy: {type: zero, plugin: ./libzero.so, stage: 2}\n"
            "hooks: [{type: LoggerHook, priority: LOW}, {type: EMAHook, priority: 40}]\n"
            "checkpoint_io: {type: safetensors}\n"
            "load_from: null\n"
            "resume: auto\n"
            "dist: {backend: nccl, timeout_s: 0.5, master_addr: 127.0.0.1, master_port: 0}\n"),
      Messages{});
  EXPECT_EQ(check("model: {type: mlp, in_features: 4, num_classes: 2}\nresume: false\nload_from: "
                  "/ckpt/x.pt\n"),
            Messages{});
}

TEST(JobSchemaTest, ModelIsRequired) {
  EXPECT_EQ(check("seed: 1\n"), Messages{"job.yaml:1:1: missing required key 'model'"});
}

TEST(JobSchemaTest, ReportsEveryErrorInFileOrder) {
  const std::string file = data_path("bad_job.yaml");
  const Job job = load_job(file, {});
  const Messages expected = {
      file + ":2:7: seed: must be >= 0, got -1",
      file + ":3:12: log_level: expected one of trace, debug, info, warn, error, got 'verbose'",
      file + ":5:3: model: missing required key 'type'",
      file + ":7:3: train_cfg.max_epoch: unknown key (did you mean 'max_epochs'?)",
      file + ":8:17: train_cfg.val_interval: expected an integer, got 'abc'",
      file + ":11:25: optim_wrapper.clip_grad.max_norm: must be > 0, got 0",
      file + ":12:24: optim_wrapper.accumulative_counts: must be >= 1, got 0",
      file + ":15:5: param_scheduler.1: missing required key 'type'",
      file + ":18:15: hooks.0.priority: must be <= 100, got 101",
      file + ":19:5: hooks.1: missing required key 'type'",
      file +
          ":19:15: hooks.1.priority: expected one of HIGHEST, VERY_HIGH, HIGH, ABOVE_NORMAL, "
          "NORMAL, BELOW_NORMAL, LOW, VERY_LOW, LOWEST, got 'HIHG' (did you mean 'HIGH'?)",
      file + ":20:9: resume: expected true, false, 'auto' or a checkpoint path, got a map",
      file + ":22:12: dist.backend: expected one of auto, gloo, nccl, got 'mpi'",
      file + ":23:16: dist.master_port: must be <= 65535, got 70000",
      file + ":24:11: strategy: expected a map, got 'ddp'",
      file + ":25:1: unknown_top: unknown key",
  };
  EXPECT_EQ(messages(validate(*job.root, job_schema())), expected);
}

TEST(JobSchemaTest, ErrorsInABaseFileNameTheBase) {
  TempDir dir;
  const std::string base = dir.write("base.yaml", "train_cfg:\n  max_epochs: 0\n");
  const std::string main = dir.write(
      "main.yaml", "_base_: base.yaml\nmodel: {type: mlp, in_features: 4, num_classes: 2}\n");
  const Job job = load_job(main, {});
  EXPECT_EQ(messages(validate(*job.root, job_schema())),
            Messages{base + ":2:15: train_cfg.max_epochs: must be >= 1, got 0"});
}

TEST(JobSchemaTest, OverrideTyposSurfaceAtTheOverride) {
  TempDir dir;
  const std::string main =
      dir.write("main.yaml",
                "model: {type: mlp, in_features: 4, num_classes: 2}\ntrain_cfg: {max_epochs: 3}\n");
  const Job job = load_job(
      main, {"train_cfg.max_epoch=5", "dist.timeout_s=0", "optim_wrapper.optimizer.lr=3e-4"});
  EXPECT_EQ(
      messages(validate(*job.root, job_schema())),
      (Messages{
          "--set 'train_cfg.max_epoch=5': train_cfg.max_epoch: unknown key (did you mean "
          "'max_epochs'?)",
          "--set 'dist.timeout_s=0': dist.timeout_s: must be > 0, got 0",
          "--set 'optim_wrapper.optimizer.lr=3e-4': optim_wrapper.optimizer: missing required "
          "key 'type'",
      }));
}

TEST(JobSchemaTest, TopLevelTypoGetsASuggestion) {
  EXPECT_EQ(
      check("model: {type: mlp, in_features: 4, num_classes: 2}\noptim_wraper: {}\nhook: []\n"),
      (Messages{"job.yaml:2:1: optim_wraper: unknown key (did you mean 'optim_wrapper'?)",
                "job.yaml:3:1: hook: unknown key (did you mean 'hooks'?)"}));
}

TEST(JobSchemaTest, SubtreesOfTheWrongKind) {
  EXPECT_EQ(check("model: {type: mlp, in_features: 4, num_classes: 2}\nhooks: {type: "
                  "LoggerHook}\ndata: {train: [1]}\nval_cfg: 3\n"),
            (Messages{"job.yaml:2:8: hooks: expected a list, got a map",
                      "job.yaml:3:15: data.train: expected a map, got a list",
                      "job.yaml:4:10: val_cfg: expected a map, got '3'"}));
}

// Issue 31, item 3: val_cfg.type and test_cfg.type are honoured as MMEngine
// means them (ValLoop and TestLoop are the loops runner-host runs) and any
// other loop is refused, naming the key, rather than run as a ValLoop.
Messages check_job(const std::string& text) {
  return messages(validate_job(*parse_yaml(text, "job.yaml")));
}

TEST(JobSchemaTest, ValAndTestLoopTypesAreMmEnginesOrRefused) {
  const std::string model = "model: {type: mlp, in_features: 4, num_classes: 2}\n";
  EXPECT_EQ(check_job(model + "val_cfg: {type: ValLoop}\ntest_cfg: {type: TestLoop}\n"),
            Messages{});
  EXPECT_EQ(check_job(model + "val_cfg: {type: mmengine.ValLoop}\ntest_cfg: {}\n"), Messages{});
  EXPECT_EQ(check_job(model + "val_cfg:\ntest_cfg:\n"), Messages{});
  EXPECT_EQ(
      check_job(model + "val_cfg: {type: MultiValLoop}\n"),
      Messages{"job.yaml:2:17: val_cfg.type: 'MultiValLoop' is not a loop runner-host runs: it "
               "runs MMEngine's ValLoop (data.val, evaluated every train_cfg.val_interval and by "
               "--mode val) and no other; write type: ValLoop or leave the key out"});
  EXPECT_EQ(check_job(model + "test_cfg: {type: ValLoop}\n"),
            Messages{"job.yaml:2:18: test_cfg.type: 'ValLoop' is not a loop runner-host runs: it "
                     "runs MMEngine's TestLoop (data.test, evaluated by --mode test) and no "
                     "other; write type: TestLoop or leave the key out"});
  EXPECT_EQ(check_job(model + "val_cfg: {type: valloop}\n"),
            Messages{"job.yaml:2:17: val_cfg.type: 'valloop' is not a loop runner-host runs: it "
                     "runs MMEngine's ValLoop (data.val, evaluated every train_cfg.val_interval "
                     "and by --mode val) and no other (did you mean 'ValLoop'?); write type: "
                     "ValLoop or leave the key out"});
}

// val_cfg / test_cfg null beside data.val / data.test would be ignored
// (the loop runs whenever the split is there): refused, as MMEngine
// refuses the pair.
TEST(JobSchemaTest, ALoopSetToNullBesideItsDataIsRefused) {
  const std::string model = "model: {type: mlp, in_features: 4, num_classes: 2}\n";
  const std::string val_data =
      "data:\n  val: {dataset: {type: synthetic_classification, num_samples: 8, num_features: 4, "
      "num_classes: 2}, batch_size: 4}\n";
  const Messages refused = check_job(model + val_data + "val_cfg:\n");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_NE(refused[0].find("val_cfg: val_cfg: null beside data.val: runner-host runs the loop "
                            "whenever data.val is there"),
            std::string::npos)
      << refused[0];
  EXPECT_EQ(check_job(model + val_data + "val_cfg: {type: ValLoop}\n"), Messages{});
  EXPECT_EQ(check_job(model + "val_cfg:\ntest_cfg:\n"), Messages{});  // no data: nothing to run
}

}  // namespace
}  // namespace rh::config
