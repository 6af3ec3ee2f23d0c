// `runner-host --estimate-memory` (issue 39, item 3): what each rank would
// keep, from the model's sizes and the strategy's EstimateMemory (ABI 1.9),
// without allocating the model or launching anything. The figures are exact
// sums over the parameters, checked to the byte on the "bytes" lines.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>

#include "common/DistributedTestUtil.hpp"  // write_cifar
#include "common/TestUtil.hpp"

namespace {

using rh::test::quote;
using rh::test::run_command;
using rh::test::TempDir;
namespace fs = std::filesystem;

// An mlp 64 -> 32 -> 8: layers.0 is 64*32 + 32 = 2080 elements, head
// 32*8 + 8 = 264; 2344 in all, 9376 bytes in float32.
constexpr uint64_t kLayer0 = 2080, kHead = 264, kAll = kLayer0 + kHead;

std::string job(const std::string& model_extra, const std::string& optimizer,
                const std::string& strategy, const std::string& optim_extra = "") {
  return "model: {type: mlp, in_features: 64, hidden: [32], num_classes: 8" + model_extra +
         "}\n"
         "data:\n"
         "  train: {dataset: {type: synthetic_classification, num_samples: 64, num_features: 64,\n"
         "          num_classes: 8}, batch_size: 8, num_workers: 0}\n"
         "optim_wrapper: {optimizer: " +
         optimizer + optim_extra +
         "}\n"
         "train_cfg: {by_epoch: false, max_iters: 2}\n"
         "strategy: " +
         strategy + "\n";
}

rh::test::CommandResult estimate(const TempDir& dir, const std::string& yaml,
                                 const std::string& flags = "") {
  const auto path = dir.write("job.yaml", yaml);
  return run_command(std::string(RH_RUNNER_HOST) + " --config " + quote(path.string()) +
                     " --estimate-memory " + flags);
}

// The "bytes <ranks>:" line's figure `field` ("params", "grads", ...).
uint64_t bytes_of(const std::string& output, const std::string& ranks, const std::string& field) {
  const std::regex line("bytes " + ranks + ":[^\\n]* " + field + " ([0-9]+)");
  std::smatch m;
  if (!std::regex_search(output, m, line)) {
    ADD_FAILURE() << "no '" << field << "' for " << ranks << " in:\n" << output;
    return 0;
  }
  return std::stoull(m[1].str());
}

TEST(EstimateMemoryTest, SingleKeepsTheModelItsGradientsAndTheOptimizersState) {
  TempDir dir;
  auto r = estimate(dir, job("", "{type: AdamW, lr: 0.001}", "{type: single}"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("optimizer AdamW, 2 state tensor(s) per element"));
  EXPECT_EQ(bytes_of(r.output, "rank 0", "params"), 4 * kAll);
  EXPECT_EQ(bytes_of(r.output, "rank 0", "grads"), 4 * kAll);
  EXPECT_EQ(bytes_of(r.output, "rank 0", "optimizer"), 2 * 4 * kAll);  // exp_avg, exp_avg_sq
  // The peak: the gradients exist from backward to zero_grad only, in place
  // of the activations backward frees (ActivationsAreWhatAForwardKeeps
  // checks those): the larger of the two counts.
  EXPECT_EQ(bytes_of(r.output, "rank 0", "backward_grads"), 4 * kAll);
  EXPECT_EQ(bytes_of(r.output, "rank 0", "total"),
            12 * kAll + std::max<uint64_t>(4 * kAll, bytes_of(r.output, "rank 0", "activations")));
}

TEST(EstimateMemoryTest, FrozenParametersHaveNoGradientAndNoOptimizerState) {
  TempDir dir;
  auto r = estimate(
      dir, job(", frozen: [layers.0]", "{type: Adam, lr: 0.001, amsgrad: true}", "{type: single}"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(bytes_of(r.output, "rank 0", "params"), 4 * kAll);
  EXPECT_EQ(bytes_of(r.output, "rank 0", "grads"), 4 * kHead);
  EXPECT_EQ(bytes_of(r.output, "rank 0", "optimizer"), 3 * 4 * kHead);  // + max_exp_avg_sq
}

TEST(EstimateMemoryTest, SgdKeepsAMomentumBufferOnlyWithMomentum) {
  TempDir dir;
  auto plain = estimate(dir, job("", "{type: SGD, lr: 0.1}", "{type: single}"));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(bytes_of(plain.output, "rank 0", "optimizer"), 0u);
  auto momentum = estimate(dir, job("", "{type: SGD, lr: 0.1, momentum: 0.9}", "{type: single}"));
  ASSERT_EQ(momentum.exit_code, 0) << momentum.output;
  EXPECT_EQ(bytes_of(momentum.output, "rank 0", "optimizer"), 4 * kAll);
}

// ddp: the flat gradient arena (every trainable gradient) and autograd's
// gradients of the largest bucket, waiting for it to launch.
TEST(EstimateMemoryTest, DdpAddsTheArenaAndTheLargestBucketWaitingForIt) {
  TempDir dir;
  // The default caps (1 MB first, 25 MB) put the model in one bucket.
  auto one =
      estimate(dir, job("", "{type: AdamW, lr: 0.001}", "{type: ddp}"), "--nproc-per-node 2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, ::testing::HasSubstr("strategy ddp, 2 rank(s) (2 per node)"));
  EXPECT_EQ(bytes_of(one.output, "ranks 0-1", "params"), 4 * kAll);
  EXPECT_EQ(bytes_of(one.output, "ranks 0-1", "grads"), 4 * kAll + 4 * kAll);
  EXPECT_EQ(bytes_of(one.output, "ranks 0-1", "optimizer"), 2 * 4 * kAll);
  EXPECT_EQ(bytes_of(one.output, "ranks 0-1", "comm"), 0u);  // an mlp has no buffers
  // Caps of one byte: every parameter its own bucket; the largest waiting
  // is layers.0.weight, 64*32 elements.
  auto each = estimate(dir,
                       job("", "{type: AdamW, lr: 0.001}",
                           "{type: ddp, bucket_cap_mb: 1e-6, first_bucket_mb: 1e-6}"),
                       "--nproc-per-node 2");
  ASSERT_EQ(each.exit_code, 0) << each.output;
  EXPECT_EQ(bytes_of(each.output, "ranks 0-1", "grads"), 4 * kAll + 4 * 64 * 32);
  // Accumulation: every autograd gradient stays beside the arena until the
  // window's last backward.
  auto window =
      estimate(dir, job("", "{type: AdamW, lr: 0.001}", "{type: ddp}", ", accumulative_counts: 2"),
               "--nproc-per-node 2");
  ASSERT_EQ(window.exit_code, 0) << window.output;
  EXPECT_EQ(bytes_of(window.output, "ranks 0-1", "grads"), 2 * 4 * kAll);
}

// ddp x tensor parallel 2: each rank keeps half of every planned parameter
// (torchtitan's plan: all but the norms) and the whole norms, as the run's
// memory/params_mb says (TensorParallelTest): llama dim 32, 3 layers of wq
// 32x32, wk and wv 16x32, wo 32x32, w1 w3 96x32, w2 32x96, two norms of 32;
// tok_embeddings and output 96x32; norm 32.
TEST(EstimateMemoryTest, DdpWithTensorParallelKeepsItsBlocksOfThePlannedParameters) {
  TempDir dir;
  const auto text = dir.write("text.txt", std::string(512, 'a') + std::string(512, 'b'));
  const std::string llama =
      "model: {type: llama, vocab_size: 96, dim: 32, n_layers: 3, n_heads: 4, n_kv_heads: 2, "
      "multiple_of: 16, max_seq_len: 16}\n"
      "data:\n  train: {dataset: {type: char_lm, path: " +
      text.string() +
      ", block_size: 16, split: train}, batch_size: 4, num_workers: 0}\n"
      "optim_wrapper: {optimizer: {type: AdamW, lr: 0.001}}\n"
      "train_cfg: {by_epoch: false, max_iters: 2}\n"
      "strategy: {type: ddp, tensor_parallel: {size: 2}}\n";
  const uint64_t split = 3 * (32 * 32 * 2 + 16 * 32 * 2 + 96 * 32 * 3) + 96 * 32 * 2;
  const uint64_t norms = 3 * 2 * 32 + 32;
  auto two = estimate(dir, llama, "--nproc-per-node 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(bytes_of(two.output, "ranks 0-1", "params"), 4 * (split / 2 + norms));
  EXPECT_EQ(bytes_of(two.output, "ranks 0-1", "optimizer"), 2 * 4 * (split / 2 + norms));
  // 2 x 2: the same blocks, and ddp's arena over a data-parallel group of 2.
  auto four = estimate(dir, llama, "--nproc-per-node 4");
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_EQ(bytes_of(four.output, "ranks 0-3", "params"), 4 * (split / 2 + norms));
  EXPECT_EQ(bytes_of(four.output, "ranks 0-3", "grads"), 2 * 4 * (split / 2 + norms));
  auto three = estimate(dir, llama, "--nproc-per-node 3");
  EXPECT_NE(three.exit_code, 0) << three.output;
  EXPECT_THAT(three.output,
              ::testing::HasSubstr("groups of 2 ranks, which do not divide the job's 3 rank(s)"));
}

// The last value of `metric` in a metrics.jsonl.
uint64_t last_metric(const std::filesystem::path& jsonl, const std::string& metric) {
  const std::string text = rh::test::read_file(jsonl);
  const std::regex value("\"" + metric + "\": ([0-9.e+]+)");
  uint64_t last = 0;
  bool found = false;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), value);
       it != std::sregex_iterator(); ++it) {
    last = static_cast<uint64_t>(std::stod((*it)[1].str()));
    found = true;
  }
  EXPECT_TRUE(found) << metric << " not in " << jsonl;
  return last;
}

// A memory/*_mb metric's first value in a metrics.jsonl, in bytes.
uint64_t metric_bytes(const std::filesystem::path& metrics, const std::string& name) {
  const std::string text = rh::test::read_file(metrics);
  std::smatch m;
  EXPECT_TRUE(std::regex_search(text, m, std::regex("\"" + name + "\": ([0-9.e+-]+)")))
      << name << " not in " << text;
  return static_cast<uint64_t>(std::llround(std::stod(m[1].str()) * 1048576.0));
}

// Estimates `strategy` for 2 ranks of a small gpt (dim 256, depth 3), trains
// it 2 steps with the metrics hook, and returns the estimate's output and
// the metrics.jsonl.
std::pair<std::string, std::filesystem::path> estimate_and_train(const TempDir& dir,
                                                                 const std::string& strategy,
                                                                 const std::string& name) {
  const auto path = dir.write(
      name + ".yaml",
      "seed: 0\n"
      "model: {type: gpt, vocab_size: 256, block_size: 16, dim: 256, depth: 3, heads: 4}\n"
      "data:\n"
      "  train: {dataset: {type: char_lm, path: " +
          std::string(RH_TEST_TEXT) +
          ", block_size: 16, split: train}, batch_size: 4,\n"
          "          num_workers: 0}\n"
          "optim_wrapper: {optimizer: {type: AdamW, lr: 0.001}}\n"
          "train_cfg: {by_epoch: false, max_iters: 2}\n"
          "strategy: " +
          strategy +
          "\n"
          "hooks: [{type: metrics}]\n");
  const std::string base =
      std::string(RH_RUNNER_HOST) + " --config " + quote(path.string()) + " --nproc-per-node 2";
  auto est = run_command(base + " --estimate-memory");
  EXPECT_EQ(est.exit_code, 0) << est.output;
  const auto work = dir / name;
  auto run = run_command(base + " --set work_dir=" + quote(work.string()));
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return {est.output, work / "metrics.jsonl"};
}

// The estimate of ranks 0-1 against a sharding strategy's own figures
// (`prefix`/param_bytes, gather_buffer_bytes, grad_bytes): the estimate's
// gradients less `transient_grads` (what the metric leaves out).
void expect_its_own_metrics(const std::string& est, const std::filesystem::path& metrics,
                            const std::string& prefix, uint64_t transient_grads,
                            const std::string& ranks = "ranks 0-1") {
  EXPECT_EQ(bytes_of(est, ranks, "params") + bytes_of(est, ranks, "gathered") +
                bytes_of(est, ranks, "masters"),
            last_metric(metrics, prefix + "/param_bytes"));
  EXPECT_EQ(bytes_of(est, ranks, "comm"), last_metric(metrics, prefix + "/gather_buffer_bytes"));
  EXPECT_EQ(bytes_of(est, ranks, "grads") - transient_grads,
            last_metric(metrics, prefix + "/grad_bytes"));
}

// zero's estimate is what the strategy itself holds when it trains: its
// zero/param_bytes (working parameters whole, the units gathered at most
// at once, the float32 masters), zero/gather_buffer_bytes (the all-gather
// pool) and zero/grad_bytes (its gradient chunks and the flat buffers in
// use at once), on 2 ranks, every stage. The estimate's gradients add the
// one autograd gradient alive while it is copied: the largest parameter,
// blocks.i.mlp.fc1.weight, 1024 x 256 float32 elements.
TEST(EstimateMemoryTest, ZeroEstimatesWhatItHoldsWhenItTrains) {
  TempDir dir;
  for (const int stage : {1, 2, 3}) {
    const std::string name = "zero" + std::to_string(stage);
    const auto [est, metrics] = estimate_and_train(
        dir, "{type: zero, zero_optimization: {stage: " + std::to_string(stage) + "}}", name);
    SCOPED_TRACE(name + "\n" + est);
    expect_its_own_metrics(est, metrics, "zero", 4 * 1024 * 256);
    if (stage == 3) {
      EXPECT_GT(bytes_of(est, "ranks 0-1", "gathered"), 0u);
    }
  }
}

// fsdp's, likewise: fsdp/param_bytes (whole parameters, the units gathered
// at most at once, the float32 masters), fsdp/gather_buffer_bytes,
// fsdp/grad_bytes (blocks, reduce buffers, the full gradients of the unit
// being copied in), for each sharding strategy on 2 ranks.
TEST(EstimateMemoryTest, FsdpEstimatesWhatItHoldsWhenItTrains) {
  TempDir dir;
  for (const std::string sharding : {"full_shard", "shard_grad_op", "no_shard"}) {
    const auto [est, metrics] =
        estimate_and_train(dir, "{type: fsdp, sharding_strategy: " + sharding + "}", sharding);
    SCOPED_TRACE(sharding + "\n" + est);
    expect_its_own_metrics(est, metrics, "fsdp", 0);
  }
}

// fsdp x tensor parallel 2 on 4 ranks (a llama): each rank's blocks of the
// planned parameters sharded over the data-parallel group of 2, as the run
// holds them (its fsdp/* figures and its AdamW state).
TEST(EstimateMemoryTest, FsdpWithTensorParallelEstimatesWhatItHoldsWhenItTrains) {
  TempDir dir;
  const auto path = dir.write(
      "mesh.yaml",
      "model: {type: llama, vocab_size: 96, dim: 32, n_layers: 3, n_heads: 4, n_kv_heads: 2, "
      "multiple_of: 16, max_seq_len: 16}\n"
      "data:\n  train: {dataset: {type: char_lm, path: " +
          std::string(RH_TEST_TEXT) +
          ", block_size: 16, split: train}, batch_size: 4, num_workers: 0}\n"
          "optim_wrapper: {optimizer: {type: AdamW, lr: 0.001}}\n"
          "train_cfg: {by_epoch: false, max_iters: 2}\n"
          "strategy: {type: fsdp, tensor_parallel: {size: 2}}\n"
          "hooks: [{type: metrics}]\n");
  const std::string base =
      std::string(RH_RUNNER_HOST) + " --config " + quote(path.string()) + " --nproc-per-node 4";
  auto est = run_command(base + " --estimate-memory");
  ASSERT_EQ(est.exit_code, 0) << est.output;
  auto run = run_command(base + " --set work_dir=" + quote((dir / "mesh").string()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  SCOPED_TRACE(est.output);
  const auto metrics = dir / "mesh" / "metrics.jsonl";
  expect_its_own_metrics(est.output, metrics, "fsdp", 0, "ranks 0-3");
  EXPECT_EQ(metric_bytes(metrics, "memory/optimizer_mb"),
            bytes_of(est.output, "ranks 0-3", "optimizer"));
  // A quarter of the model's float32 elements (43,232: half of the split
  // ones, then half of the rows each), and each unit's rows padded to the
  // shards.
  const uint64_t masters = bytes_of(est.output, "ranks 0-3", "masters");
  EXPECT_GE(masters, 4u * (43232 / 4));
  EXPECT_LT(masters, 4u * (43232 / 4 + 512));
}

// The estimate refuses what the run would: fsdp's ignored_modules entry
// that matches no parameter, named with its place in the job file.
TEST(EstimateMemoryTest, FsdpRefusesAnIgnoredModuleTheModelLacks) {
  TempDir dir;
  auto r =
      estimate(dir, job("", "{type: AdamW, lr: 0.001}", "{type: fsdp, ignored_modules: [nope]}"),
               "--nproc-per-node 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("strategy.ignored_modules.0: no module 'nope' in the "
                                             "model (no parameter is named 'nope.<...>'"));
}

TEST(EstimateMemoryTest, SingleOnSeveralRanksIsRefused) {
  TempDir dir;
  auto r =
      estimate(dir, job("", "{type: AdamW, lr: 0.001}", "{type: single}"), "--nproc-per-node 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("strategy 'single' runs one process, but this job "
                                             "has 2 ranks"));
}

// A strategy built without EstimateMemory (ABI 1.8 or older, or one that
// leaves it out): the host says so and prints only what it knows.
TEST(EstimateMemoryTest, AStrategyWithoutEstimateMemorySaysSo) {
  TempDir dir;
  const std::string plugin = std::string(RH_TEST_PLUGIN_DIR) + "/librh_test_helper_hook.so";
  auto r = estimate(
      dir, job("", "{type: AdamW, lr: 0.001}", "{type: helper_strategy, plugin: " + plugin + "}"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::HasSubstr("strategy 'helper_strategy' does not estimate its "
                                             "memory (EstimateMemory, ABI 1.9)"));
  EXPECT_THAT(r.output, ::testing::Not(::testing::HasSubstr("bytes ")));
}

// Peak RSS (KiB) of `runner-host --config <width x width mlp> --estimate-memory
// --nproc-per-node 4`, its output discarded.
long estimate_peak_rss_kib(const TempDir& dir, int width) {
  const std::string w = std::to_string(width);
  const auto path = dir.write(
      "mlp" + w + ".yaml",
      "model: {type: mlp, in_features: " + w + ", hidden: [" + w + ", " + w +
          "], num_classes: " + w +
          "}\n"
          "data:\n"
          "  train: {dataset: {type: synthetic_classification, num_samples: 8, num_features: " +
          w + ",\n          num_classes: " + w +
          "}, batch_size: 8, num_workers: 0}\n"
          "optim_wrapper: {optimizer: {type: AdamW, lr: 0.001}}\n"
          "train_cfg: {by_epoch: false, max_iters: 1}\n"
          "strategy: {type: ddp}\n");
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(RH_RUNNER_HOST, RH_RUNNER_HOST, "--config", path.c_str(), "--estimate-memory",
            "--nproc-per-node", "4", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  EXPECT_EQ(::wait4(pid, &status, 0, &usage), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "width " << width << ": " << status;
  return usage.ru_maxrss;
}

// The model is built on the meta device: the estimate of an mlp 8192 ->
// 8192 -> 8192 -> 8192 (201 M float32 parameters, 768 MiB, every byte of
// which a real build writes) peaks within 64 MiB of a tiny mlp's (8 wide):
// the same program, the same LibTorch, whatever LibTorch costs to load.
TEST(EstimateMemoryTest, NothingOfTheModelIsAllocated) {
  TempDir dir;
  const long tiny = estimate_peak_rss_kib(dir, 8);
  const long big = estimate_peak_rss_kib(dir, 8192);
  EXPECT_LT(big - tiny, 64 * 1024)
      << "peak RSS " << big / 1024 << " MiB against " << tiny / 1024 << " MiB for the tiny model";
}

// The activation estimate (model/ActivationEstimate.hpp) against what one
// forward of the same job really leaves alive for backward: the growth of
// the CPU tensors over the forward (memory/activations_mb, counted by
// lifecycle/TensorMemory.hpp, exact to the byte). One iteration, no loader
// worker (a worker's next batch would be counted too). Each model, with and
// without dropout, written-out or fused attention as this LibTorch has it,
// whole and with units recomputed (each keeping the generator's state).
// The estimate leaves out 0-dim tensors autograd keeps (8 bytes in all on
// LibTorch 1.13: the loss's); kSlack covers eight of them.
TEST(EstimateMemoryTest, ActivationsAreWhatAForwardKeeps) {
  constexpr int64_t kSlack = 64;
  TempDir dir;
  const fs::path cifar = dir / "cifar";
  rh::test::write_cifar(cifar);
  const std::string text =
      "{type: char_lm, path: " + std::string(RH_TEST_TEXT) + ", block_size: 32, split: train}";
  const std::string features =
      "{type: synthetic_classification, num_samples: 64, num_features: 32, num_classes: 10}";
  const std::string images = "{type: cifar10, root: " + cifar.string() + ", split: train}";
  const std::string gpt = "type: gpt, vocab_size: 256, block_size: 32, dim: 64, heads: 4";
  const std::string vit =
      "type: vit, image_size: 32, patch_size: 8, in_channels: 3, num_classes: 10, dim: 32, heads: "
      "2";
  const std::string mlp = "type: mlp, in_features: 32, hidden: [64, 48], num_classes: 10";
  struct Case {
    std::string name, model, dataset, extra;
  };
  const std::vector<Case> cases = {
      {"gpt", gpt + ", depth: 2", text, ""},
      {"gpt_dropout", gpt + ", depth: 2, dropout: 0.1", text, ""},
      {"gpt_full_ac", gpt + ", depth: 3", text, "activation_checkpoint: {mode: full}\n"},
      {"gpt_selective_ac_dropout", gpt + ", depth: 4, dropout: 0.1", text,
       "activation_checkpoint: {mode: selective, selective_ac_option: 2}\n"},
      {"vit_dropout", vit + ", depth: 2, dropout: 0.1", images, ""},
      {"mlp_relu_dropout", mlp + ", activation: relu, dropout: 0.2", features, ""},
      {"mlp_gelu_dropout", mlp + ", activation: gelu, dropout: 0.2", features, ""},
      {"mlp_tanh", mlp + ", activation: tanh", features, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto path =
        dir.write(c.name + ".yaml", "seed: 0\nmodel: {" + c.model +
                                        "}\ndata:\n  train: {dataset: " + c.dataset +
                                        ", batch_size: 4, num_workers: 0}\n"
                                        "optim_wrapper: {optimizer: {type: AdamW, lr: 0.001}}\n"
                                        "train_cfg: {by_epoch: false, max_iters: 1}\n"
                                        "hooks: [{type: metrics}]\n" +
                                        c.extra);
    const std::string base = std::string(RH_RUNNER_HOST) + " --config " + quote(path.string());
    const auto est = run_command(base + " --estimate-memory");
    ASSERT_EQ(est.exit_code, 0) << est.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(est.output, m,
                                  std::regex("bytes activations: after_forward ([0-9]+) "
                                             "recompute ([0-9]+)")))
        << est.output;
    const int64_t estimated = std::stoll(m[1].str());
    const int64_t recompute = std::stoll(m[2].str());
    const auto work = dir / c.name;
    const auto run = run_command(base + " --set work_dir=" + quote(work.string()));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    // The metric is bytes / 2^20, written with every digit: bytes again.
    const std::string text_metrics = rh::test::read_file(work / "metrics.jsonl");
    ASSERT_TRUE(
        std::regex_search(text_metrics, m, std::regex("\"memory/activations_mb\": ([0-9.e+-]+)")))
        << text_metrics;
    const auto measured = static_cast<int64_t>(std::llround(std::stod(m[1].str()) * 1048576.0));
    EXPECT_LE(std::llabs(measured - estimated), kSlack)
        << "estimated " << estimated << " bytes, measured " << measured << "\n"
        << est.output;
    EXPECT_EQ(recompute > 0, !c.extra.empty()) << est.output;
  }
}

}  // namespace

namespace {

// Each iteration's memory/params_mb, memory/grads_mb and memory/optimizer_mb
// (the storages of the model's parameters, of the gradients the optimizer
// read, of its state; bytes / 2^20 with every digit) split what a rank holds
// as the estimate does: equal to its figures, single on one rank and fsdp's
// shards on two.
TEST(EstimateMemoryTest, TheMemoryMetricsSplitAsTheEstimate) {
  TempDir dir;
  const auto single = dir / "single";
  const auto path = dir.write(
      "job.yaml", job("", "{type: AdamW, lr: 0.001}", "{type: single}") +
                      "hooks: [{type: metrics}]\nwork_dir: " + quote(single.string()) + "\n");
  const std::string base = std::string(RH_RUNNER_HOST) + " --config " + quote(path.string());
  const auto est = run_command(base + " --estimate-memory");
  ASSERT_EQ(est.exit_code, 0) << est.output;
  const auto run = run_command(base);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto metrics = single / "metrics.jsonl";
  EXPECT_EQ(metric_bytes(metrics, "memory/params_mb"), bytes_of(est.output, "rank 0", "params"));
  EXPECT_EQ(metric_bytes(metrics, "memory/grads_mb"), bytes_of(est.output, "rank 0", "grads"));
  EXPECT_EQ(metric_bytes(metrics, "memory/optimizer_mb"),
            bytes_of(est.output, "rank 0", "optimizer"));

  const auto [fsdp_est, fsdp_metrics] =
      estimate_and_train(dir, "{type: fsdp, sharding_strategy: full_shard}", "fsdp");
  SCOPED_TRACE(fsdp_est);
  EXPECT_EQ(metric_bytes(fsdp_metrics, "memory/optimizer_mb"),
            bytes_of(fsdp_est, "ranks 0-1", "optimizer"));
  EXPECT_EQ(metric_bytes(fsdp_metrics, "memory/params_mb"), 0u) << "the shards are freed";
}

}  // namespace
