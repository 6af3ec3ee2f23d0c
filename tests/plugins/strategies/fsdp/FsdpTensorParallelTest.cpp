// fsdp x tensor parallel (2-D, torchtitan's FSDP x TP) end to end, through
// the runner-host binary, on a small llama fed from a token shard file:
// - 2-way fsdp x 2-way tensor parallel on 4 ranks = ddp on 2 ranks (the
//   same global batch), and tensor parallel 2 under fsdp on 2 ranks (a
//   data-parallel group of one) = ddp on 1 rank: the weights within 1e-5
//   after 30 AdamW steps with clip_grad and accumulation;
// - one checkpoint layout: the ranks' shards of their blocks are shards of
//   the whole tensors, so the checkpoint resumes under the same mesh bit
//   for bit (= the uninterrupted run), under ddp on 2 ranks (its optimizer
//   state too), a ddp checkpoint under the mesh, state_dict_type sharded
//   consolidates to the same weights, and it converts to Hugging Face's
//   layout;
// - hybrid_shard beside tensor_parallel is refused, naming why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::read_safetensors;
using ::testing::HasSubstr;

namespace {

const std::string k2d = "{type: fsdp, tensor_parallel: {size: 2}}";

// The bar, as TensorParallelTest's kLikeDdp (the same llama and
// optimizer; why it is not 0 is said there): tensor parallelism sums a
// rowwise layer's partial products, ddp takes one product; fsdp adds
// nothing to that (it equals ddp bit for bit, FsdpTest). Measured here
// (LibTorch 1.13): see the test's comments.
constexpr double kLikeDdp = 1e-5;

// The llama of rh::test::llama_char_job (vocabulary 96, dim 32, 3 layers,
// 4 heads / 2 kv heads), fed from `tokens` (a token_bin file), accumulating
// 2 batches per step, checkpoints every `every` iterations.
std::string job(const std::string& strategy, int iters, int every, const std::string& extra = "") {
  return "seed: 2\n"
         "model: {type: llama, vocab_size: 96, dim: 32, n_layers: 3, n_heads: 4, n_kv_heads: 2, "
         "multiple_of: 16, max_seq_len: 16}\n"
         "data:\n"
         "  train: {dataset: {type: token_bin, path: train.bin, block_size: 16, vocab_size: 96},\n"
         "          batch_size: 4, shuffle: true, num_workers: 0}\n"
         "optim_wrapper:\n"
         "  optimizer: {type: AdamW, lr: 0.003, weight_decay: 0.1}\n"
         "  clip_grad: {max_norm: 0.5}\n"
         "  accumulative_counts: 2\n"
         "train_cfg: {by_epoch: false, max_iters: " +
         std::to_string(iters) + "}\nstrategy: " + strategy +
         "\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: " + std::to_string(every) +
         "}\n  - {type: metrics, interval: 1}\ndist: {timeout_s: 30}\n" + extra;
}

class FsdpTensorParallelTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  void SetUp() override {
    // nanoGPT's train.bin: uint16 token ids, little-endian; the verses'
    // printable characters as ids 0..95.
    const std::string text = rh::test::read_file(RH_TEST_TEXT);
    std::string bin;
    for (unsigned char c : text) {
      const uint16_t id = c >= 32 && c < 128 ? static_cast<uint16_t>(c - 32) : 0;
      bin.push_back(static_cast<char>(id & 0xff));
      bin.push_back(static_cast<char>(id >> 8));
    }
    dir.write("train.bin", bin);
  }
  rh::test::CommandResult run(const std::string& name, const std::string& yaml, int ranks) {
    return rh::test::run_job(dir, name, yaml, ranks, "", /*launcher=*/true);
  }
  fs::path ckpt(const std::string& run, int iter, const std::string& file) {
    return dir / run / ("iter_" + std::to_string(iter)) / (file + ".safetensors");
  }
  // A copy of `from`'s work_dir holding only its checkpoint `iter`, for a
  // run named `to` to resume.
  std::string resume_from(const std::string& from, int iter, const std::string& to) {
    return rh::test::resume_from_copy(dir, from, iter, to);
  }
};

TEST_F(FsdpTensorParallelTest, TwoByTwoEqualsDdpAndItsCheckpointIsAnyOthers) {
  auto ddp = run("ddp", job("{type: ddp}", 30, 10), 2);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto mesh = run("mesh", job(k2d, 30, 10), 4);
  ASSERT_EQ(mesh.exit_code, 0) << mesh.output;
  EXPECT_THAT(mesh.output, HasSubstr("tensor parallel: 2 groups of 2 consecutive ranks, data "
                                     "over 2 replicas"));
  rh::test::expect_within(ckpt("ddp", 30, "model"), ckpt("mesh", 30, "model"), kLikeDdp);
  // Every rank wrote its shards; the whole tensors are in the model file.
  for (int r = 0; r < 4; ++r)
    EXPECT_TRUE(fs::exists(ckpt("mesh", 30, "optimizer.rank" + std::to_string(r))));
  // With sequence parallel: ddp too (TensorParallelTest says why the bar).
  auto sp = run(
      "sp", job("{type: fsdp, tensor_parallel: {size: 2, sequence_parallel: true}}", 30, 30), 4);
  ASSERT_EQ(sp.exit_code, 0) << sp.output;
  rh::test::expect_within(ckpt("ddp", 30, "model"), ckpt("sp", 30, "model"), kLikeDdp);
  const auto weights = read_safetensors(ckpt("mesh", 30, "model"));
  EXPECT_EQ(weights.at("layers.2.feed_forward.w2.weight").size(), 32u * 96u);
  EXPECT_EQ(weights.at("output.weight").size(), 96u * 32u);

  // Resumed under the same mesh: the uninterrupted run, bit for bit (each
  // rank's optimizer shards too).
  auto again = run("again", job(k2d, 30, 10, resume_from("mesh", 10, "again")), 4);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  rh::test::expect_within(ckpt("mesh", 30, "model"), ckpt("again", 30, "model"), 0.0);
  for (int r = 0; r < 4; ++r) {
    const std::string f = "optimizer.rank" + std::to_string(r);
    rh::test::expect_within(ckpt("mesh", 30, f), ckpt("again", 30, f), 0.0);
  }
  // Under ddp on 2 ranks: the optimizer state (AdamW's moments and step)
  // comes from the ranks' shards as whole tensors, so ddp continues as ddp.
  auto as_ddp = run("as_ddp", job("{type: ddp}", 30, 10, resume_from("mesh", 10, "as_ddp")), 2);
  ASSERT_EQ(as_ddp.exit_code, 0) << as_ddp.output;
  rh::test::expect_within(ckpt("ddp", 30, "model"), ckpt("as_ddp", 30, "model"), kLikeDdp);
  rh::test::expect_within(ckpt("ddp", 30, "optimizer"), ckpt("as_ddp", 30, "optimizer"), kLikeDdp);
  // And ddp's checkpoint under the mesh.
  auto from_ddp = run("from_ddp", job(k2d, 30, 10, resume_from("ddp", 10, "from_ddp")), 4);
  ASSERT_EQ(from_ddp.exit_code, 0) << from_ddp.output;
  rh::test::expect_within(ckpt("ddp", 30, "model"), ckpt("from_ddp", 30, "model"), kLikeDdp);

  // Converts to Hugging Face's layout as any llama checkpoint
  // (CkptToolTest.ConvertToHfIsWhatHuggingFacesLlamaComputes checks the values).
  const fs::path hf = dir / "hf";
  auto convert = rh::test::run_command("env -u RH_PLUGIN_PATH " + rh::test::quote(RH_RUNNER_HOST) +
                                       " ckpt convert " +
                                       rh::test::quote((dir / "mesh" / "iter_30").string()) +
                                       " --to hf -o " + rh::test::quote(hf.string()));
  ASSERT_EQ(convert.exit_code, 0) << convert.output;
  const auto converted = read_safetensors(hf / "model.safetensors");
  EXPECT_EQ(converted.at("model.layers.0.self_attn.k_proj.weight").size(), 16u * 32u);
  EXPECT_EQ(converted.at("model.layers.2.mlp.down_proj.weight").size(), 32u * 96u);
}

TEST_F(FsdpTensorParallelTest, ShardedStateDictAndOneReplicaAreTheSameRun) {
  // state_dict_type sharded: the weights only as the ranks' shards (a
  // rowwise block's rows gathered over its group); consolidated, the full
  // state dict's run bit for bit (the same arithmetic).
  auto full = run("full", job(k2d, 12, 12), 4);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  auto sharded =
      run("sharded",
          job("{type: fsdp, state_dict_type: sharded, tensor_parallel: {size: 2}}", 12, 12), 4);
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  if (fs::exists(ckpt("sharded", 12, "model"))) {  // buffers only
    EXPECT_EQ(read_safetensors(ckpt("sharded", 12, "model")).count("output.weight"), 0u);
  }
  const fs::path whole = dir / "sharded.safetensors";
  auto consolidate = rh::test::run_command("env -u RH_PLUGIN_PATH " +
                                           rh::test::quote(RH_RUNNER_HOST) + " ckpt consolidate " +
                                           rh::test::quote((dir / "sharded" / "iter_12").string()) +
                                           " -o " + rh::test::quote(whole.string()));
  ASSERT_EQ(consolidate.exit_code, 0) << consolidate.output;
  rh::test::expect_within(ckpt("full", 12, "model"), whole, 0.0);
  // Tensor parallel 2 on 2 ranks: fsdp's data-parallel group is one rank
  // (no sharding, no collective of its own) = ddp on 1 rank.
  auto ddp = run("ddp1", job("{type: ddp}", 12, 12), 1);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto tp = run("tp2", job(k2d, 12, 12), 2);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  rh::test::expect_within(ckpt("ddp1", 12, "model"), ckpt("tp2", 12, "model"), kLikeDdp);
}

TEST_F(FsdpTensorParallelTest, HybridShardBesideTensorParallelIsRefused) {
  auto r = run(
      "hybrid",
      job("{type: fsdp, sharding_strategy: hybrid_shard, tensor_parallel: {size: 2}}", 2, 2), 4);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("hybrid_shard beside tensor_parallel (a 3-D mesh) is not "
                                  "supported"));
  EXPECT_FALSE(fs::exists(dir / "hybrid"));
}

// A third party's sharding strategy whose shard of a rowwise block is not
// whole rows of it (the own_optimizer test plugin's tensor_parallel_from:
// elements 1.. of each parameter): a checkpoint could not place it in the
// whole tensor, so the host refuses it when the optimizer is built, naming
// the strategy and the parameter, before a step is taken.
// Whole rows (elements 96.. : 2 rows of w2's block, 3 of w1's) but without
// the sharded_checkpoint trait: rank 0 saves the optimizer, which it can
// only do from whole blocks: refused too.
TEST_F(FsdpTensorParallelTest, AShardOfARowwiseBlockThatIsNotWholeRowsIsRefused) {
  for (const auto& [from, says] : std::vector<std::pair<int, std::string>>{
           {1,
            "its optimizer tensor of 'layers.0.feed_forward.w2.weight' (elements 1..1536 of the "
            "block [32, 48]) is not whole rows of the tensor-parallel block, which the plan "
            "splits along dim 1"},
           {96,
            "its optimizer tensor of 'layers.0.feed_forward.w1.weight' holds elements 96..1536 "
            "of the block [48, 32] without the sharded_checkpoint trait"}}) {
    const std::string strategy =
        "{type: own_optimizer, tensor_parallel_from: " + std::to_string(from) +
        ", plugin: " + (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_own_optimizer.so").string() +
        "}";
    std::string yaml = job(strategy, 2, 2);
    const std::string clip = "  clip_grad: {max_norm: 0.5}\n";
    yaml.replace(yaml.find(clip), clip.size(), "");  // own_optimizer has no ReduceGradNorm
    const std::string name = "from" + std::to_string(from);
    auto r = run(name, yaml, 2);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_THAT(r.output, HasSubstr(says));
    EXPECT_FALSE(fs::exists(dir / name / "metrics.jsonl")) << "it trained";
  }
}

}  // namespace
