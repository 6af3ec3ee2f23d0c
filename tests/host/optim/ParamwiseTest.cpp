// paramwise_cfg under every strategy (issue 31, item 1). A sharding
// strategy hands the optimizer its own flat shards (OptimizerParams), whose
// requires_grad is false and whose shape is a 1-D piece; the host matches
// each to its parameter (name, whole shape), so:
// - custom_keys lr_mult 0 / decay_mult 0 on every parameter changes nothing
//   under single, ddp, zero stages 1-3 and fsdp (2 ranks);
// - norm_decay_mult 0 and flat_decay_mult 0 under zero stage 2 and fsdp take
//   ddp's steps bit for bit (a flat shard of a weight matrix is not "1-D"),
//   and each setting changes the result (the comparison is not vacuous);
// - MMPretrain's layer-wise lr decay likewise.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::expect_close;
using rh::test::read_safetensors;

namespace {

// A small gpt on a text file, checkpoints after every iteration.
std::string job(const std::string& strategy, const std::string& paramwise, int iters) {
  return "seed: 5\n"
         "model: {type: gpt, vocab_size: 96, block_size: 16, dim: 32, depth: 2, heads: 2}\n"
         "data:\n"
         "  train: {dataset: {type: char_lm, path: " +
         std::string(RH_TEST_TEXT) +
         ", block_size: 16, split: train}, batch_size: 4, shuffle: true, num_workers: 0}\n"
         "optim_wrapper:\n"
         "  optimizer: {type: AdamW, lr: 0.003, weight_decay: 0.5}\n" +
         (paramwise.empty() ? std::string() : "  paramwise_cfg: " + paramwise + "\n") +
         "train_cfg: {by_epoch: false, max_iters: " + std::to_string(iters) +
         "}\nstrategy: " + strategy +
         "\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: 1}\n"
         "dist: {timeout_s: 30}\n";
}

const std::vector<std::pair<std::string, std::string>> kStrategies = {
    {"ddp", "{type: ddp}"},
    {"zero1", "{type: zero, zero_optimization: {stage: 1, reduce_bucket_size: 3000}}"},
    {"zero2", "{type: zero, zero_optimization: {stage: 2, reduce_bucket_size: 3000}}"},
    {"zero3",
     "{type: zero, zero_optimization: {stage: 3, reduce_bucket_size: 3000, "
     "stage3_param_persistence_threshold: 100}}"},
    {"fsdp", "{type: fsdp}"}};

class ParamwiseTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;
  rh::test::CommandResult run(const std::string& name, const std::string& yaml, int ranks) {
    return rh::test::run_job(dir, name, yaml, ranks);
  }
};

TEST_F(ParamwiseTest, LrMultZeroFreezesEveryParameterUnderEveryStrategy) {
  const std::string frozen =
      "{custom_keys: {weight: {lr_mult: 0, decay_mult: 0}, bias: {lr_mult: 0, decay_mult: 0}}}";
  auto single = run("single", job("{type: single}", frozen, 2), 1);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  std::vector<std::pair<std::string, int>> runs = {{"single", 1}};
  for (const auto& [name, strategy] : kStrategies) {
    auto r = run(name, job(strategy, frozen, 2), 2);
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    runs.push_back({name, 2});
  }
  for (const auto& [name, ranks] : runs) {
    const auto a = read_safetensors(dir / name / "iter_1" / "model.safetensors");
    const auto b = read_safetensors(dir / name / "iter_2" / "model.safetensors");
    ASSERT_EQ(a.size(), b.size());
    int moved = 0;
    for (const auto& [tensor, values] : a)
      if (values != b.at(tensor)) ++moved;
    EXPECT_EQ(moved, 0) << name << ": " << moved << " of " << a.size()
                        << " tensors changed with lr_mult 0";
  }
}

TEST_F(ParamwiseTest, NormAndFlatDecayMultUnderShardingEqualDdp) {
  for (const std::string paramwise :
       {"{norm_decay_mult: 0.0}", "{flat_decay_mult: 0.0}", "{bias_decay_mult: 0.0}"}) {
    SCOPED_TRACE(paramwise);
    auto ddp = run("ddp", job("{type: ddp}", paramwise, 6), 2);
    ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
    auto plain = run("plain", job("{type: ddp}", "", 6), 2);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    // The setting matters: without it some parameter ends elsewhere.
    const auto with = read_safetensors(dir / "ddp" / "iter_6" / "model.safetensors");
    const auto without = read_safetensors(dir / "plain" / "iter_6" / "model.safetensors");
    int differ = 0;
    for (const auto& [tensor, values] : with)
      if (values != without.at(tensor)) ++differ;
    EXPECT_GT(differ, 0) << "the setting changed nothing: the comparison would be vacuous";
    for (const std::string sharded : {"zero2", "fsdp"}) {
      const std::string strategy = sharded == "zero2" ? kStrategies[2].second : "{type: fsdp}";
      auto r = run(sharded, job(strategy, paramwise, 6), 2);
      ASSERT_EQ(r.exit_code, 0) << r.output;
      // Bit for bit: on 2 ranks both sum the same two halves (a + b = b + a)
      // of gradients divided by the same world size, and AdamW is
      // elementwise, so a shard's step is the whole tensor's piece.
      expect_close(dir / "ddp" / "iter_6" / "model.safetensors",
                   dir / sharded / "iter_6" / "model.safetensors", 0.0f);
      fs::remove_all(dir / sharded);
    }
    fs::remove_all(dir / "ddp");
    fs::remove_all(dir / "plain");
  }
}

// MMPretrain's layer-wise lr decay applies by parameter under sharding too:
// zero stage 2 and fsdp take ddp's steps bit for bit.
TEST_F(ParamwiseTest, LayerDecayUnderShardingEqualsDdp) {
  auto with_decay = [](std::string yaml) {
    const std::string at = "  paramwise_cfg:";
    return yaml.replace(yaml.find(at), 0,
                        "  constructor: LearningRateDecayOptimWrapperConstructor\n");
  };
  const std::string paramwise = "{layer_decay_rate: 0.5, norm_decay_mult: 0.0}";
  auto ddp = run("ddp", with_decay(job("{type: ddp}", paramwise, 6)), 2);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  for (const std::string sharded : {"zero2", "fsdp"}) {
    const std::string strategy = sharded == "zero2" ? kStrategies[2].second : "{type: fsdp}";
    auto r = run(sharded, with_decay(job(strategy, paramwise, 6)), 2);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // Bit for bit, as above.
    expect_close(dir / "ddp" / "iter_6" / "model.safetensors",
                 dir / sharded / "iter_6" / "model.safetensors", 0.0f);
  }
}

}  // namespace
