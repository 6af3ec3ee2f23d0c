// The ddp strategy's bucket plan and unused-parameter handling, end to end
// through the runner-host binary:
// - exact resume on 3 ranks over the TCP ring, where the bucket layout
//   decides the summation order (the plan is saved with the checkpoint);
// - find_unused_parameters keeps communication overlapping backward, leaves
//   parameters no rank used without a gradient (as one process does), and
//   repairs a wrong guess of which parameters go unused;
// - broadcast_buffers: one broadcast per step, every rank's buffers equal;
// - one rank is `single`: no communication, the same bits, and its
//   checkpoint resumes on 2 ranks.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;

namespace {

using rh::test::expect_close;
using rh::test::metric_lines;
using rh::test::read_safetensors;
using rh::test::safetensors_header;
using rh::test::write_cifar;

std::vector<std::string> tensor_names(const fs::path& p) {
  uint64_t n = 0;
  std::vector<std::string> names;
  for (const auto& kv : safetensors_header(rh::test::read_file(p), n))
    if (kv.first.as<std::string>() != "__metadata__") names.push_back(kv.first.as<std::string>());
  return names;
}

std::string model_file(const std::string& name) {
  return (fs::path(RH_TEST_MODEL_DIR) / name).string();
}

// A TorchScript MLP 16 -> 32 -> 32 -> 4 with a layer that does not always get
// a gradient; 480 samples.
std::string job(const std::string& model, const std::string& strategy, int batch,
                const std::string& train_cfg, const std::string& hooks,
                const std::string& optimizer = "{type: SGD, lr: 0.05, momentum: 0.9}",
                const std::string& extra = "") {
  return "seed: 3\n"
         "model: {type: torchscript, path: " +
         model_file(model) +
         ", num_classes: 4}\n"
         "data:\n"
         "  train: {dataset: {type: synthetic_classification, num_samples: 480, num_features: 16, "
         "num_classes: 4},\n"
         "          batch_size: " +
         std::to_string(batch) +
         ", shuffle: true, num_workers: 0}\n"
         "optim_wrapper: {optimizer: " +
         optimizer + "}\ntrain_cfg: " + train_cfg + "\nstrategy: " + strategy +
         "\nhooks:" + (hooks.empty() ? std::string(" []\n") : "\n" + hooks) +
         "dist: {timeout_s: 20}\n" + extra;
}

class DdpExactnessTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult run(const std::string& name, const std::string& yaml,
                              const std::string& args) {
    dir.write(name + ".yaml", "work_dir: " + (dir / name).string() + "\n" + yaml);
    return rh::test::run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " +
                                 quote(RH_RUNNER_HOST) + " --config " + name + ".yaml " + args);
  }
  static std::string launch(int ranks) { return "--nproc-per-node " + std::to_string(ranks); }
};

// Small buckets (several per backward) whose layout changes when the plan is
// rebuilt from the observed order: the unused layer, registered last, is in
// the first buckets of the initial reverse-order plan and in the last ones
// after. On 3 ranks the TCP ring's chunks make every element's summation
// order depend on where it sits in its bucket, so a resumed process that
// planned its buckets anew would not reproduce the uninterrupted run.
constexpr const char* kSmallBuckets =
    "{type: ddp, first_bucket_mb: 0.0001, bucket_cap_mb: 0.001, find_unused_parameters: true}";

TEST_F(DdpExactnessTest, ExactResumeOnThreeRanksOverTcp) {
  const std::string hooks = "  - {type: checkpoint, by_epoch: false, interval: 4}\n";
  const std::string tcp = " --set dist.shared_memory=false";
  auto straight = run("straight",
                      job("unused_param_mlp_scripted.pt", kSmallBuckets, 4,
                          "{by_epoch: false, max_iters: 8}", hooks),
                      launch(3) + tcp);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_THAT(straight.output, HasSubstr("all_reduce through tcp ring"));
  auto part = run("resumed",
                  job("unused_param_mlp_scripted.pt", kSmallBuckets, 4,
                      "{by_epoch: false, max_iters: 4}", hooks),
                  launch(3) + tcp);
  ASSERT_EQ(part.exit_code, 0) << part.output;
  auto rest =
      run("resumed",
          job("unused_param_mlp_scripted.pt", kSmallBuckets, 4, "{by_epoch: false, max_iters: 8}",
              hooks, "{type: SGD, lr: 0.05, momentum: 0.9}", "resume: auto\n"),
          launch(3) + tcp);
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  EXPECT_THAT(rest.output, HasSubstr("resumed from"));
  EXPECT_THAT(rest.output, ::testing::Not(HasSubstr("no bucket plan")));
  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string a = rh::test::read_file(dir / "straight/iter_8" / f);
    const std::string b = rh::test::read_file(dir / "resumed/iter_8" / f);
    // Not EXPECT_EQ: it would print both files.
    EXPECT_TRUE(a == b) << f << " differs (" << a.size() << " vs " << b.size() << " bytes)";
  }
  // The plan travels in the checkpoint's state.
  const auto names = tensor_names(dir / "resumed/iter_4/state.safetensors");
  EXPECT_THAT(names, ::testing::Contains("strategy.bucket_plan.params"));
  EXPECT_THAT(names, ::testing::Contains("strategy.bucket_plan.lengths"));
}

// The int64 values of tensor `key` in a safetensors file.
std::vector<int64_t> longs(const fs::path& file, const std::string& key) {
  const std::string bytes = rh::test::read_file(file);
  uint64_t n = 0;
  const YAML::Node header = safetensors_header(bytes, n);
  const YAML::Node t = header[key];
  if (!t || t["dtype"].as<std::string>() != "I64") return {};
  const size_t begin = t["data_offsets"][0].as<size_t>(), end = t["data_offsets"][1].as<size_t>();
  std::vector<int64_t> out((end - begin) / 8);
  std::memcpy(out.data(), bytes.data() + 8 + n + begin, end - begin);
  return out;
}

// A world of one communicates nothing: ddp on one rank (a real world, from
// the launcher) takes the same steps as `single`, bit for bit (no bucket
// copy, no divide by the world size, no collective: no ddp/* metric). Its
// checkpoint's bucket plan is marked as never rebuilt (one rank observes no
// order), so 2 ranks resuming it rebuild theirs from their first step.
TEST_F(DdpExactnessTest, OneRankIsSingleBitForBitAndItsCheckpointResumesOnTwo) {
  const std::string hooks =
      "  - {type: checkpoint, by_epoch: false, interval: 6}\n  - {type: metrics}\n";
  const std::string cfg = "{by_epoch: false, max_iters: 6}";
  auto single =
      run("single", job("unused_param_mlp_scripted.pt", "{type: single}", 8, cfg, hooks), "");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto one =
      run("one", job("unused_param_mlp_scripted.pt", "{type: ddp}", 8, cfg, hooks), launch(1));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr("strategy ddp on cpu, seed 3, rank 0 of 1"));
  for (const char* f : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string a = rh::test::read_file(dir / "single/iter_6" / f);
    const std::string b = rh::test::read_file(dir / "one/iter_6" / f);
    EXPECT_TRUE(a == b) << f << " differs between single and ddp on one rank";
  }
  for (const auto& line : metric_lines(dir / "one/metrics.jsonl", "train"))
    for (const auto& [name, value] : line) EXPECT_NE(name.rfind("ddp/", 0), 0u) << name;
  const auto meta = longs(dir / "one/iter_6/state.safetensors", "strategy.bucket_plan.meta");
  ASSERT_EQ(meta.size(), 3u);
  EXPECT_EQ(meta[2], 0) << "one rank marked its plan as rebuilt from an observed order";
  auto two =
      run("one",
          job("unused_param_mlp_scripted.pt", "{type: ddp}", 4, "{by_epoch: false, max_iters: 12}",
              hooks, "{type: SGD, lr: 0.05, momentum: 0.9}", "resume: auto\n"),
          launch(2));
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_THAT(two.output, HasSubstr("resumed from"));
  EXPECT_THAT(two.output, ::testing::Not(HasSubstr("no bucket plan")));
  const auto last = metric_lines(dir / "one/metrics.jsonl", "train").back();
  EXPECT_GT(last.at("ddp/buckets"), 0);  // two ranks communicate again
  const auto rebuilt = longs(dir / "one/iter_12/state.safetensors", "strategy.bucket_plan.meta");
  ASSERT_EQ(rebuilt.size(), 3u);
  EXPECT_EQ(rebuilt[2], 1) << "2 ranks did not rebuild the plan from their first step";
}

// An unused parameter must not hold back the buckets after it: from the
// second step on (the first one tells ddp which parameters go unused) every
// bucket is issued before backward returns. The result still equals one
// process with the global batch, and the unused layer, which no rank used,
// has no gradient (no optimizer state), as in one process.
TEST_F(DdpExactnessTest, UnusedParameterKeepsTheOverlapAndTheEquivalence) {
  const std::string cfg = "{by_epoch: false, max_iters: 20}";
  const std::string hooks =
      "  - {type: checkpoint, by_epoch: false, interval: 20}\n  - {type: metrics}\n";
  auto single =
      run("single", job("unused_param_mlp_scripted.pt", "{type: single}", 16, cfg, hooks), "");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  auto ddp =
      run("ddp", job("unused_param_mlp_scripted.pt", kSmallBuckets, 8, cfg, hooks), launch(2));
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  EXPECT_THAT(ddp.output, ::testing::Not(HasSubstr("received no gradient")));
  auto train = metric_lines(dir / "ddp/metrics.jsonl", "train");
  ASSERT_EQ(train.size(), 20u);
  for (const auto& line : train) {
    const double buckets = line.at("ddp/buckets");
    EXPECT_GE(buckets, 3.0);
    if (line.at("iter") >= 2) {
      EXPECT_EQ(line.at("ddp/buckets_launched_in_backward"), buckets) << "iter " << line.at("iter");
    }
  }
  // 1e-5 of each tensor's largest value, an effect-size bound (as
  // DistributedTest.DdpOnTwoRanksEqualsOneRankWithTheGlobalBatch): 16
  // per-sample gradients summed in another order, carried up to 10 times by
  // momentum 0.9, and the float32 updates rounding differently once the
  // weights differ (≤ 2u·|θ| a step, u = 2^-24: 40u = 2.4e-6 over 20 steps,
  // sqrt(20)·u = 2.7e-7 as a random walk; the sums' share depends on the
  // per-sample gradients' size, not known here). Measured 4.2e-7
  // (head.bias); a missing average doubles every step, putting each tensor
  // about its own 20-step change away.
  expect_close(dir / "single/iter_20/model.safetensors", dir / "ddp/iter_20/model.safetensors",
               1e-5f);
  for (const char* run_name : {"single", "ddp"})
    for (const auto& name : tensor_names(dir / run_name / "iter_20/optimizer.safetensors"))
      EXPECT_EQ(name.rfind("unused.", 0), std::string::npos) << run_name << ": " << name;
}

// `branch` is used only by a rank whose batch sums to > 0, so which ranks use
// it changes from step to step and ddp's guess of the unused parameters
// (last step's) is sometimes wrong: a gradient arrives after its bucket left
// and is added by a second all-reduce. Plain SGD, so a parameter without a
// gradient and one with a zero gradient stay alike: find_unused_parameters
// true must give the weights of false (which sums zeros for the missing
// gradients), bit for bit on 2 ranks.
TEST_F(DdpExactnessTest, AWrongGuessOfUnusedParametersIsRepaired) {
  // One parameter per bucket: a guessed-unused parameter's bucket can leave
  // before its gradient arrives.
  const std::string tiny = ", first_bucket_mb: 0.0001, bucket_cap_mb: 0.0001";
  const std::string cfg = "{by_epoch: false, max_iters: 20}";
  const std::string hooks =
      "  - {type: checkpoint, by_epoch: false, interval: 20}\n  - {type: metrics}\n";
  const std::string sgd = "{type: SGD, lr: 0.05}";
  auto found = run("found",
                   job("branchy_mlp_scripted.pt",
                       "{type: ddp, find_unused_parameters: true" + tiny + "}", 8, cfg, hooks, sgd),
                   launch(2));
  ASSERT_EQ(found.exit_code, 0) << found.output;
  auto zeros =
      run("zeros",
          job("branchy_mlp_scripted.pt", "{type: ddp, find_unused_parameters: false" + tiny + "}",
              8, cfg, hooks, sgd),
          launch(2));
  ASSERT_EQ(zeros.exit_code, 0) << zeros.output;
  // Without find_unused_parameters the warning says what happens.
  EXPECT_THAT(zeros.output, HasSubstr("received no gradient in this backward"));
  EXPECT_THAT(zeros.output, HasSubstr("counts as zero"));
  double repaired = 0;
  for (const auto& line : metric_lines(dir / "found/metrics.jsonl", "train"))
    repaired += line.at("ddp/late_gradients");
  EXPECT_GT(repaired, 0) << "no step exercised the repair; change the seed";
  // Bit for bit: a gradient that misses its bucket is added by a second
  // all-reduce of what each rank left out; on 2 ranks every way of adding
  // the two halves and zeros rounds once, as a + b = b + a and x + 0 = x.
  expect_close(dir / "zeros/iter_20/model.safetensors", dir / "found/iter_20/model.safetensors",
               0.0f);
}

std::string convnet_job(const fs::path& cifar, const std::string& strategy, int batch) {
  return "seed: 5\n"
         "model: {type: convnet, in_channels: 3, num_classes: 10, width: 4, blocks: [1, 1]}\n"
         "data:\n"
         "  train: {dataset: {type: cifar10, root: " +
         cifar.string() + ", split: train}, batch_size: " + std::to_string(batch) +
         ", shuffle: true}\n"
         "  val: {dataset: {type: cifar10, root: " +
         cifar.string() + ", split: test}, batch_size: 8}\n" +
         "optim_wrapper: {optimizer: {type: SGD, lr: 0.05, momentum: 0.9}}\n"
         "train_cfg: {by_epoch: false, max_iters: 6, val_interval: 6}\n"
         "strategy: " +
         strategy +
         "\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: 6}\n  - {type: metrics}\n"
         "dist: {timeout_s: 20}\n";
}

// broadcast_buffers: rank 0's batch-norm statistics reach every rank in one
// collective per step. Each rank validates its share of the val set with its
// own buffers and the losses are averaged; that equals one process
// validating rank 0's checkpoint only when every rank holds rank 0's buffers
// (with broadcast_buffers: false it does not).
TEST_F(DdpExactnessTest, BroadcastBuffersIsOneCollectivePerStepAndEqualizesTheRanks) {
  const fs::path cifar = dir / "cifar";
  write_cifar(cifar);
  auto val_loss_of_checkpoint = [&](const std::string& name) {
    auto eval = run(name + "_eval", convnet_job(cifar, "{type: single}", 8),
                    "--mode val --set load_from=" + (dir / name / "iter_6").string());
    EXPECT_EQ(eval.exit_code, 0) << eval.output;
    auto val = metric_lines(dir / (name + "_eval") / "metrics.jsonl", "val");
    return val.empty() ? std::nan("") : val.back().at("loss");
  };
  auto ddp = run("bn", convnet_job(cifar, "{type: ddp, broadcast_buffers: true}", 4), launch(2));
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto train = metric_lines(dir / "bn/metrics.jsonl", "train");
  ASSERT_EQ(train.size(), 6u);
  for (const auto& line : train) EXPECT_EQ(line.at("ddp/buffer_broadcasts"), 1.0);
  auto val = metric_lines(dir / "bn/metrics.jsonl", "val");
  ASSERT_FALSE(val.empty());
  const double ddp_loss = val.back().at("loss");
  // Both validate the same 32 samples in batches of 8 with the same
  // weights and buffers; each batch's float32 loss sum of 8 positive terms
  // is within γ7 = 7u of its exact value (u = 2^-24, batches added in
  // double), so the means are within 14u = 8.3e-7 relative, if each
  // sample's logits do not depend on its batch's other samples (same batch
  // size on both sides). 1e-5 is 12x that; measured 2.4e-8. Without the
  // broadcast (below) the loss moves by 4.0e-4 here, 40x the tolerance.
  EXPECT_NEAR(ddp_loss, val_loss_of_checkpoint("bn"), 1e-5 * std::fabs(ddp_loss));
  // The control: without the broadcast, rank 1 validates with its own
  // statistics and the averaged loss is another one (by 4.0e-4 relative
  // here; 1e-4 stays 10x above the tolerance above).
  auto own = run("own", convnet_job(cifar, "{type: ddp, broadcast_buffers: false}", 4), launch(2));
  ASSERT_EQ(own.exit_code, 0) << own.output;
  const double own_loss = metric_lines(dir / "own/metrics.jsonl", "val").back().at("loss");
  EXPECT_GT(std::fabs(own_loss - val_loss_of_checkpoint("own")), 1e-4 * std::fabs(own_loss));
}

}  // namespace
