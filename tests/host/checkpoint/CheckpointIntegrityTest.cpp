// A checkpoint is what the run says it is (issue 31, items 7 and 9), through
// the runner-host binary:
// - once a checkpoint is published, a `latest` that cannot be replaced does
//   not stop the run with a false "could not save": the log says what is
//   published and what `latest` names, and resume: auto takes the newest
//   checkpoint (RH_FAULT_INJECT=ckpt_latest:fail);
// - a strategy whose ranks' optimizers hold different tensors
//   (OptimizerParams) without the sharded_checkpoint trait, whose
//   checkpoints would hold rank 0's optimizer state only, is refused before
//   anything is trained or saved, naming the strategy and the trait;
// - `runner-host ckpt inspect` does not call a checkpoint complete when its
//   optimizer state does not cover the parameters the run's optimizer held
//   (meta.json "optimizer_params"), naming the parameters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// An mlp with 6 parameters, layers.0 frozen: the optimizer holds 4.
std::string mlp_job(const std::string& strategy, int iters, const std::string& extra = "") {
  return "seed: 3\n"
         "model: {type: mlp, in_features: 8, hidden: [16, 16], num_classes: 4, frozen: "
         "[layers.0]}\n"
         "data:\n"
         "  train: {dataset: {type: synthetic_classification, num_samples: 64, num_features: 8, "
         "num_classes: 4}, batch_size: 4, shuffle: true, num_workers: 0}\n"
         "optim_wrapper: {optimizer: {type: AdamW, lr: 0.01}}\n"
         "train_cfg: {by_epoch: false, max_iters: " +
         std::to_string(iters) + "}\nstrategy: " + strategy +
         "\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: 2}\n"
         "dist: {timeout_s: 30}\n" +
         extra;
}

class CheckpointIntegrityTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult inspect(const fs::path& checkpoint) {
    return rh::test::run_command("env -u RH_PLUGIN_PATH " + quote(RH_RUNNER_HOST) +
                                 " ckpt inspect " + quote(checkpoint.string()));
  }
  // meta.json of `checkpoint` without the lines `drop` picks (one tensor
  // of the table, or one key, per line).
  static void edit_meta(const fs::path& checkpoint,
                        const std::function<bool(const std::string& line)>& drop) {
    std::istringstream in(rh::test::read_file(checkpoint / "meta.json"));
    std::string out;
    for (std::string line; std::getline(in, line);)
      if (!drop(line)) out += line + "\n";
    std::ofstream(checkpoint / "meta.json", std::ios::trunc) << out;
  }
  static bool starts(const std::string& line, const std::string& text) {
    const size_t first = line.find_first_not_of(' ');
    return first != std::string::npos && line.compare(first, text.size(), text) == 0;
  }
};

// Item 7: the rename of latest.tmp over `latest` fails at every save (the
// checkpoints are published by then). The run used to stop at its first
// save with "cannot update .../latest"; it trains to its end, each save
// says what is published, and `latest` (none here) leaves resume: auto to
// take the newest checkpoint.
TEST_F(CheckpointIntegrityTest,
       ALatestThatCannotBeReplacedDoesNotStopTheRunAndResumeTakesTheNewest) {
  const fs::path work = dir / "job";
  auto r = rh::test::run_job(dir, "job", mlp_job("{type: single}", 4), 1,
                             "RH_FAULT_INJECT=ckpt_latest:fail");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string name : {"iter_2", "iter_4"}) {
    EXPECT_THAT(r.output,
                HasSubstr("checkpoint '" + name + "' is published (" + (work / name).string() +
                          "), but `latest` cannot name it: cannot rename " +
                          (work / "latest.tmp").string()));
    EXPECT_TRUE(fs::is_directory(work / name)) << name;
  }
  EXPECT_THAT(r.output, HasSubstr("The save counts as done; the run goes on"));
  EXPECT_FALSE(fs::exists(work / "latest"));
  EXPECT_FALSE(fs::exists(work / "latest.tmp"));

  auto resumed = rh::test::run_job(dir, "job", mlp_job("{type: single}", 6, "resume: auto\n"), 1);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output,
              HasSubstr("resumed from " + (work / "iter_4").string() + " at epoch 0, iteration 4"));
  EXPECT_EQ(rh::test::read_file(work / "latest"), "iter_6\n");
}

// Item 9: own_optimizer with split_over_ranks (tests/sdk/test_plugins) hands rank
// r the trainable parameters i with i % 2 == r and does not declare
// sharded_checkpoint. It
// used to train and save checkpoints holding half the optimizer state,
// which `ckpt inspect` called complete.
TEST_F(CheckpointIntegrityTest, AStrategyWhoseRanksHoldDifferentOptimizerTensorsIsRefused) {
  const std::string strategy =
      "{type: own_optimizer, split_over_ranks: true, plugin: " +
      (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_own_optimizer.so").string() + "}";
  auto r = rh::test::run_job(dir, "partial", mlp_job(strategy, 4), 2);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.signal, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("strategy 'own_optimizer' ("));
  EXPECT_THAT(r.output,
              HasSubstr(" hands each rank's optimizer different tensors (OptimizerParams) but does "
                        "not declare the sharded_checkpoint trait: rank 1 holds 2 that rank 0 "
                        "does not ('head.bias', 'layers.1.bias'); rank 0 holds 2 that rank 1 does "
                        "not ('head.weight', 'layers.1.weight')"));
  EXPECT_THAT(r.output, HasSubstr("The strategy must declare sharded_checkpoint"));
  // Refused before the first step: nothing trained, nothing saved.
  EXPECT_THAT(r.output, Not(HasSubstr("saved checkpoint")));
  EXPECT_FALSE(fs::exists(dir / "partial" / "iter_2"));
}

// Item 9: ckpt inspect checks the optimizer state against meta.json's
// "optimizer_params" (the optimizer's parameters over every rank, recorded
// at set-up): a checkpoint as a split_over_ranks run's rank 0 wrote them (no
// state for the parameters other ranks held) is incomplete, naming them;
// so is one missing a single field. A meta.json without the record (an
// older runner-host's) cannot be checked for whole parameters: inspect
// says so instead of claiming coverage.
TEST_F(CheckpointIntegrityTest, InspectFlagsOptimizerStateThatDoesNotCoverTheParameters) {
  auto r = rh::test::run_job(dir, "job", mlp_job("{type: single}", 2), 1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const fs::path checkpoint = dir / "job" / "iter_2";
  const std::string intact = rh::test::read_file(checkpoint / "meta.json");
  EXPECT_THAT(intact, HasSubstr("\"optimizer_params\": [\"head.bias\", \"head.weight\", "
                                "\"layers.1.bias\", \"layers.1.weight\"]"));
  auto ok = inspect(checkpoint);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output,
              HasSubstr("optimizer state: AdamW (step, exp_avg, exp_avg_sq) for each of the 4 "
                        "parameter(s) the run's optimizer held (meta.json \"optimizer_params\")"));
  EXPECT_THAT(ok.output, HasSubstr("ok: every file verifies and every shard matches its checksum"));

  // The head's state never written (as on rank 1 of a split_over_ranks run).
  edit_meta(checkpoint, [&](const std::string& line) { return starts(line, "\"optim.head."); });
  auto missing = inspect(checkpoint);
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output,
              HasSubstr("incomplete: no optimizer state for 2 of the 4 parameter(s) the run's "
                        "optimizer held (meta.json \"optimizer_params\"): 'head.bias', "
                        "'head.weight'; AdamW keeps step, exp_avg, exp_avg_sq for each, and "
                        "resume cannot restore them"));
  EXPECT_THAT(missing.output, HasSubstr("every file verifies and every shard matches its "
                                        "checksum, but the checkpoint is incomplete"));
  EXPECT_THAT(missing.output, Not(HasSubstr("ok: ")));

  // One field of one parameter.
  std::ofstream(checkpoint / "meta.json", std::ios::trunc) << intact;
  edit_meta(checkpoint, [&](const std::string& line) {
    return starts(line, "\"optim.layers.1.bias.exp_avg_sq\"");
  });
  auto partial = inspect(checkpoint);
  EXPECT_EQ(partial.exit_code, 1) << partial.output;
  EXPECT_THAT(partial.output,
              HasSubstr("incomplete: 1 of the 4 parameter(s) the run's optimizer held (meta.json "
                        "\"optimizer_params\") lack part of their AdamW state (step, exp_avg, "
                        "exp_avg_sq): 'layers.1.bias' (no exp_avg_sq)"));

  // No record: what can be checked is, and the rest is said.
  std::ofstream(checkpoint / "meta.json", std::ios::trunc) << intact;
  edit_meta(checkpoint, [&](const std::string& line) {
    return starts(line, "\"optimizer_params\"") || starts(line, "\"optim.head.");
  });
  auto unrecorded = inspect(checkpoint);
  EXPECT_EQ(unrecorded.exit_code, 0) << unrecorded.output;
  EXPECT_THAT(unrecorded.output,
              HasSubstr("optimizer state: AdamW (step, exp_avg, exp_avg_sq) for each of the 2 "
                        "parameter(s) with optimizer state; meta.json does not record which "
                        "parameters the run's optimizer held"));
}

}  // namespace
