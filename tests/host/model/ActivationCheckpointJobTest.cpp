// activation_checkpoint through the runner-host program: a gpt with dropout
// on trains 10 steps to the same weights and optimizer state, byte for
// byte, with every unit recomputed (full) or every second one (selective)
// as without, under single (1 process) and under ddp, zero stage 3 and
// fsdp full_shard on 2 ranks (zero 3 and fsdp gather a unit's parameters
// for its recompute, at its PRE_BACKWARD); a run with it resumes bit for
// bit; bad values are refused by --dry-run, naming the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::expect_equal_bytes;
using ::testing::HasSubstr;

namespace {

std::string gpt_job(const std::string& strategy, int iters, const std::string& extra) {
  return "seed: 3\n"
         "model: {type: gpt, vocab_size: 96, block_size: 16, dim: 32, depth: 3, heads: 2, "
         "dropout: 0.1}\n"
         "data:\n"
         "  train: {dataset: {type: char_lm, path: " +
         std::string(RH_TEST_TEXT) +
         ", block_size: 16, split: train},\n"
         "          batch_size: 4, shuffle: true, num_workers: 0}\n"
         "optim_wrapper: {optimizer: {type: AdamW, lr: 0.003, weight_decay: 0.1}}\n"
         "train_cfg: {by_epoch: false, max_iters: " +
         std::to_string(iters) + "}\nstrategy: " + strategy +
         "\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: 5}\n"
         "dist: {timeout_s: 30}\n" +
         extra;
}

const std::string kFull = "activation_checkpoint: {mode: full}\n";
const std::string kEveryOther =
    "activation_checkpoint: {mode: selective, selective_ac_option: 2}\n";

class ActivationCheckpointJobTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  void expect_same_state(const std::string& a, const std::string& b, int ranks, int iter) {
    const fs::path at_a = dir / a / ("iter_" + std::to_string(iter));
    const fs::path at_b = dir / b / ("iter_" + std::to_string(iter));
    expect_equal_bytes(at_a / "model.safetensors", at_b / "model.safetensors");
    for (int r = 0; r < ranks; ++r) {
      const std::string f = "optimizer.rank" + std::to_string(r) + ".safetensors";
      if (fs::exists(at_a / f)) expect_equal_bytes(at_a / f, at_b / f);
    }
  }
};

TEST_F(ActivationCheckpointJobTest, EveryStrategyTrainsBitForBitAsWithout) {
  struct Case {
    std::string name, strategy;
    int ranks;
  };
  for (const Case& c : {Case{"single", "{type: single}", 1}, Case{"ddp", "{type: ddp}", 2},
                        Case{"zero3", "{type: zero, zero_optimization: {stage: 3}}", 2},
                        Case{"fsdp", "{type: fsdp, sharding_strategy: full_shard}", 2}}) {
    SCOPED_TRACE(c.name);
    auto plain = rh::test::run_job(dir, c.name, gpt_job(c.strategy, 10, ""), c.ranks);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    auto full = rh::test::run_job(dir, c.name + "_full", gpt_job(c.strategy, 10, kFull), c.ranks);
    ASSERT_EQ(full.exit_code, 0) << full.output;
    EXPECT_THAT(full.output, HasSubstr("activation checkpoint: embed, blocks.0, blocks.1, "
                                       "blocks.2, head recompute in backward"));
    expect_same_state(c.name, c.name + "_full", c.ranks, 10);
    auto some =
        rh::test::run_job(dir, c.name + "_sel", gpt_job(c.strategy, 10, kEveryOther), c.ranks);
    ASSERT_EQ(some.exit_code, 0) << some.output;
    EXPECT_THAT(some.output, HasSubstr("activation checkpoint: blocks.0, blocks.2 recompute"));
    expect_same_state(c.name, c.name + "_sel", c.ranks, 10);
  }
}

TEST_F(ActivationCheckpointJobTest, ResumesBitForBit) {
  const std::string fsdp = "{type: fsdp, sharding_strategy: full_shard}";
  auto straight = rh::test::run_job(dir, "straight", gpt_job(fsdp, 10, kFull), 2);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  auto resumed = rh::test::run_job(
      dir, "resumed",
      gpt_job(fsdp, 10, kFull + "resume: " + (dir / "straight" / "iter_5").string() + "\n"), 2);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("resumed from"));
  expect_same_state("straight", "resumed", 2, 10);
}

TEST_F(ActivationCheckpointJobTest, BadValuesAreRefusedByDryRunNamingTheKey) {
  struct Case {
    std::string section, says;
  };
  for (const Case& c : {
           Case{"{mode: partial}", "activation_checkpoint.mode: "},
           Case{"{mode: selective}",
                "activation_checkpoint: mode: selective needs selective_ac_option: N"},
           Case{"{mode: selective, selective_ac_option: op}",
                "activation_checkpoint.selective_ac_option: 'op' (torchtitan's per-operator"},
           Case{"{mode: selective, selective_ac_option: 0}",
                "activation_checkpoint.selective_ac_option: expected a number of units >= 1"},
           Case{"{mode: full, selective_ac_option: 2}",
                "activation_checkpoint.selective_ac_option: applies to mode: selective only"},
       }) {
    SCOPED_TRACE(c.section);
    dir.write("bad.yaml",
              "work_dir: " + (dir / "bad").string() + "\n" +
                  gpt_job("{type: single}", 1, "activation_checkpoint: " + c.section + "\n"));
    auto r = rh::test::run_command("cd " + rh::test::quote(dir.path().string()) +
                                   " && env -u RH_PLUGIN_PATH " + rh::test::quote(RH_RUNNER_HOST) +
                                   " --config bad.yaml --dry-run");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.says));
    EXPECT_FALSE(fs::exists(dir / "bad")) << "work_dir created before the refusal";
  }
}

}  // namespace
