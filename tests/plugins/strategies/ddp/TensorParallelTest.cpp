// Tensor parallelism (ABI 1.11's TensorParallelPlan; ddp's tensor_parallel)
// end to end, through the runner-host binary, on a small llama:
// - TP 2 on 2 ranks = ddp on 1 rank, and 2-way data x 2-way tensor parallel
//   on 4 ranks = ddp on 2 ranks (the same global batch): parameters and
//   optimizer state within 1e-5 after 30 AdamW steps with clip_grad and
//   accumulation; each rank keeps exactly its blocks (parameter and
//   optimizer bytes);
// - one checkpoint layout: a tensor-parallel checkpoint holds whole tensors;
//   it resumes under tensor parallelism bit for bit (= the uninterrupted
//   run) and under ddp on another number of ranks, a ddp checkpoint
//   resumes under tensor parallelism, and it converts to Hugging Face's
//   layout;
// - plans a model cannot run are refused, naming why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::read_safetensors;
using ::testing::HasSubstr;

namespace {

const std::string kTp2 = "{type: ddp, tensor_parallel: {size: 2}}";

// The small llama of rh::test::llama_char_job (4 query heads, 2 key/value
// heads, vocabulary 96, 3 layers), AdamW with clip_grad, accumulating
// `accumulate` batches per step, checkpoints every `every` iterations.
std::string job(const std::string& strategy, int iters, int every, int accumulate = 1,
                const std::string& extra = "") {
  std::string j =
      rh::test::llama_char_job(RH_TEST_TEXT, strategy, iters, "  - {type: metrics, interval: 1}\n");
  const std::string interval = "interval: " + std::to_string(iters) + "}";
  j.replace(j.find(interval), interval.size(), "interval: " + std::to_string(every) + "}");
  if (accumulate > 1) {
    const std::string clip = "  clip_grad: {max_norm: 0.5}\n";
    j.replace(j.find(clip), clip.size(),
              clip + "  accumulative_counts: " + std::to_string(accumulate) + "\n");
  }
  return j + extra;
}

// The bar (issue 42: "= ddp within 1e-5 after 30 steps"). Tensor
// parallelism sums each rowwise layer's output from the ranks' partial
// products, ddp in one product: float32 rounds them differently (~1e-7
// relative), and 30 AdamW steps carry that forward without bound in
// principle (Adam divides by the gradient's own scale). Measured on these
// jobs (LibTorch 1.13, this CPU): 2.7e-6 (TP 2) and 2.3e-6 (2 x 2); 6.6e-6
// for 2 x 2 without accumulation (twice the steps); a wrong split (a missing
// all-reduce, a block from the wrong rank, no reduction over the replicas)
// moves parameters by >1e-1 (ConformanceTest's broken plugin: 0.52).
constexpr double kLikeDdp = 1e-5;

void expect_equal(const fs::path& a_file, const fs::path& b_file) {
  rh::test::expect_within(a_file, b_file, 0.0);
}

class TensorParallelTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult run(const std::string& name, const std::string& yaml, int ranks) {
    return rh::test::run_job(dir, name, yaml, ranks, "", /*launcher=*/true);
  }
  fs::path ckpt(const std::string& run, int iter, const std::string& file) {
    return dir / run / ("iter_" + std::to_string(iter)) / (file + ".safetensors");
  }
  void expect_like(const std::string& a, const std::string& b, int iter, double bound) {
    rh::test::expect_within(ckpt(a, iter, "model"), ckpt(b, iter, "model"), bound);
    rh::test::expect_within(ckpt(a, iter, "optimizer"), ckpt(b, iter, "optimizer"), bound);
  }
  // A copy of `from`'s work_dir holding only its checkpoint `iter`, for a
  // run named `to` to resume.
  std::string resume_from(const std::string& from, int iter, const std::string& to) {
    return rh::test::resume_from_copy(dir, from, iter, to);
  }
  double last_train(const std::string& run, const std::string& metric) {
    const auto lines = rh::test::metric_lines(dir / run / "metrics.jsonl", "train");
    EXPECT_FALSE(lines.empty()) << run;
    return lines.empty() ? -1 : lines.back().at(metric);
  }
};

TEST_F(TensorParallelTest, TwoRanksEqualDdpOnOneRankAndKeepHalfOfEachSplitLayer) {
  auto ddp = run("ddp", job("{type: ddp}", 30, 30, 2), 1);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto tp = run("tp", job(kTp2, 30, 30, 2), 2);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  EXPECT_THAT(tp.output, HasSubstr("tensor parallel: 1 groups of 2 consecutive ranks, data over "
                                   "1 replicas"));
  expect_like("ddp", "tp", 30, kLikeDdp);
  // Sequence parallel (the norms on each rank's half of the positions, the
  // residual stream sharded along the sequence between the blocks): ddp
  // too, within the same bar (the norm weights' gradients are summed from
  // the ranks' halves).
  auto sp = run(
      "sp", job("{type: ddp, tensor_parallel: {size: 2, sequence_parallel: true}}", 30, 30, 2), 2);
  ASSERT_EQ(sp.exit_code, 0) << sp.output;
  expect_like("ddp", "sp", 30, kLikeDdp);
  // What rank 0 keeps, in float32 elements: dim 32, 3 layers of wq 32x32,
  // wk and wv 16x32 (2 kv heads of 8), wo 32x32, w1 w3 96x32 and w2 32x96
  // (hidden 96), two norms of 32; tok_embeddings and output 96x32; norm 32.
  // Split in halves: everything but the norms.
  const double split = 3 * (32 * 32 * 2 + 16 * 32 * 2 + 96 * 32 * 3) + 96 * 32 * 2;
  const double norms = 3 * 2 * 32 + 32;
  const double mib = 1024.0 * 1024.0;
  EXPECT_EQ(last_train("ddp", "memory/params_mb"), (split + norms) * 4 / mib);
  EXPECT_EQ(last_train("tp", "memory/params_mb"), (split / 2 + norms) * 4 / mib);
  // AdamW: two states per element, for the blocks alone.
  EXPECT_EQ(last_train("tp", "memory/optimizer_mb"), 2 * (split / 2 + norms) * 4 / mib);
  // The checkpoint holds whole tensors, as ddp's.
  const auto weights = read_safetensors(ckpt("tp", 30, "model"));
  EXPECT_EQ(weights.at("layers.0.attention.wk.weight").size(), 16u * 32u);
  EXPECT_EQ(weights.at("layers.2.feed_forward.w2.weight").size(), 32u * 96u);
  EXPECT_EQ(weights.at("tok_embeddings.weight").size(), 96u * 32u);
}

TEST_F(TensorParallelTest, TwoByTwoEqualsDdpAndResumesUnderEitherLayout) {
  // Accumulating 2 batches, saved every 10 iterations (window ends).
  auto ddp = run("ddp", job("{type: ddp}", 30, 10, 2), 2);
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto tp = run("tp", job(kTp2, 30, 10, 2), 4);
  ASSERT_EQ(tp.exit_code, 0) << tp.output;
  EXPECT_THAT(tp.output, HasSubstr("tensor parallel: 2 groups of 2 consecutive ranks, data over "
                                   "2 replicas"));
  expect_like("ddp", "tp", 30, kLikeDdp);
  // The job's throughput counts each batch once (2 replicas, not 4 ranks).
  EXPECT_NEAR(last_train("tp", "job_tokens_per_s"), 2 * last_train("tp", "tokens_per_s"),
              1e-9 * last_train("tp", "job_tokens_per_s"));
  // Resumed under the same plan: the uninterrupted run, bit for bit.
  auto again = run("tp_again", job(kTp2, 30, 10, 2, resume_from("tp", 10, "tp_again")), 4);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_equal(ckpt("tp", 30, "model"), ckpt("tp_again", 30, "model"));
  expect_equal(ckpt("tp", 30, "optimizer"), ckpt("tp_again", 30, "optimizer"));
  // Under ddp on 2 ranks, and the other way: each half as the other layout
  // computes it, so ddp within the bar.
  auto as_ddp = run("as_ddp", job("{type: ddp}", 30, 10, 2, resume_from("tp", 10, "as_ddp")), 2);
  ASSERT_EQ(as_ddp.exit_code, 0) << as_ddp.output;
  expect_like("ddp", "as_ddp", 30, kLikeDdp);
  auto as_tp = run("as_tp", job(kTp2, 30, 10, 2, resume_from("ddp", 10, "as_tp")), 4);
  ASSERT_EQ(as_tp.exit_code, 0) << as_tp.output;
  expect_like("ddp", "as_tp", 30, kLikeDdp);
  // Converts to Hugging Face's layout as any llama checkpoint
  // (CkptToolTest.ConvertToHfIsWhatHuggingFacesLlamaComputes checks the values).
  const fs::path hf = dir / "hf";
  auto convert =
      rh::test::run_command("env -u RH_PLUGIN_PATH " + rh::test::quote(RH_RUNNER_HOST) +
                            " ckpt convert " + rh::test::quote((dir / "tp" / "iter_30").string()) +
                            " --to hf -o " + rh::test::quote(hf.string()));
  ASSERT_EQ(convert.exit_code, 0) << convert.output;
  const auto converted = read_safetensors(hf / "model.safetensors");
  EXPECT_EQ(converted.at("model.layers.0.self_attn.k_proj.weight").size(), 16u * 32u);
  EXPECT_EQ(converted.at("model.layers.2.mlp.down_proj.weight").size(), 32u * 96u);
  EXPECT_TRUE(fs::exists(hf / "config.json"));
}

TEST_F(TensorParallelTest, PlansTheModelCannotRunAreRefusedNamingWhy) {
  struct Case {
    std::string name, yaml;
    int ranks;
    std::string says;
  };
  const std::string gpt =
      "seed: 1\nmodel: {type: gpt, vocab_size: 96, block_size: 16, dim: 32, depth: 1, heads: 2}\n"
      "data:\n  train: {dataset: {type: char_lm, path: " +
      std::string(RH_TEST_TEXT) +
      ", block_size: 16, split: train}, batch_size: 4, num_workers: 0}\n"
      "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n"
      "train_cfg: {by_epoch: false, max_iters: 2}\nhooks: []\nstrategy: " +
      kTp2 + "\ndist: {timeout_s: 30}\n";
  const std::string scripted =
      "seed: 1\nmodel: {type: torchscript, path: " + std::string(RH_TEST_MODEL_DIR) +
      "/tiny_mlp_scripted.pt, num_classes: 4}\n"
      "data:\n  train: {dataset: {type: synthetic_classification, num_samples: 32, "
      "num_features: 16, num_classes: 4}, batch_size: 4, num_workers: 0}\n"
      "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n"
      "train_cfg: {by_epoch: false, max_iters: 2}\nhooks: []\nstrategy: " +
      kTp2 + "\ndist: {timeout_s: 30}\n";
  auto plan = [](const std::string& rules) {
    return "{type: ddp, tensor_parallel: {size: 2, plan: {" + rules + "}}}";
  };
  const std::vector<Case> cases = {
      {"gpt", gpt, 2, "model.type 'gpt' cannot run the tensor-parallel plan of strategy 'ddp'"},
      {"torchscript", scripted, 2, "a TorchScript module's forward is opaque"},
      {"kv_heads", job("{type: ddp, tensor_parallel: {size: 4}}", 2, 2), 4,
       "model.n_kv_heads 2 is not divisible by tensor_parallel size 4"},
      {"rowwise_wq", job(plan("'layers.*.attention.wq': rowwise"), 2, 2), 2,
       "layers.0.attention.wq is rowwise; llama splits attention by heads"},
      {"half_ffn", job(plan("'layers.*.feed_forward.w1': colwise"), 2, 2), 2,
       "layers.0.feed_forward.w3 is replicate; llama splits the feed-forward by hidden features"},
      {"no_module", job(plan("'layers.*.attn.wq': colwise"), 2, 2), 2,
       "tensor-parallel rule 'layers.*.attn.wq' (colwise) matches no module of the model"},
      {"style", job(plan("'layers.*.attention.wq': colwize"), 2, 2), 2,
       "'colwize' is no style: colwise, rowwise, vocab, sequence or replicate"},
      {"heads", job("{type: ddp, tensor_parallel: {size: 3}}", 2, 2), 3,
       "model.n_heads 4 is not divisible by tensor_parallel size 3"},
      {"size", job(kTp2, 2, 2), 3,
       "tensor-parallel plan has groups of 2 ranks, which do not "
       "divide the job's 3 rank(s)"},
      {"seed", job(kTp2, 2, 2, 1, "diff_rank_seed: true\n"), 2,
       "the ranks of a tensor-parallel group compute one model and must draw the same numbers"},
      {"sp_some_norms", job(plan("'layers.*.attention_norm': sequence"), 2, 2), 2,
       "layers.0.attention_norm is sequence; llama's norms are all replicated or all sequence "
       "parallel"},
      {"sp_replicated_ffn",
       job("{type: ddp, tensor_parallel: {size: 2, sequence_parallel: true, plan: {"
           "'layers.*.attention.wq': colwise, 'layers.*.attention.wk': colwise, "
           "'layers.*.attention.wv': colwise, 'layers.*.attention.wo': rowwise, "
           "tok_embeddings: vocab, output: vocab}}}",
           2, 2),
       2, "layers.0.feed_forward is replicated; sequence-parallel norms need every block split"},
      {"sp_seq_len",
       [&] {
         std::string j =
             job("{type: ddp, tensor_parallel: {size: 2, sequence_parallel: true}}", 2, 2);
         j.replace(j.find("max_seq_len: 16"), 15, "max_seq_len: 15");
         j.replace(j.find("block_size: 16"), 14, "block_size: 14");
         return j;
       }(),
       2, "model.max_seq_len 15 is not divisible by tensor_parallel size 2 (sequence parallel"},
  };
  for (const Case& c : cases) {
    auto r = run(c.name, c.yaml, c.ranks);
    EXPECT_NE(r.exit_code, 0) << c.name << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.says)) << c.name;
    // Every one is checked at step 1 (before anything is created): said
    // once, by the launch gate, exit code 2.
    EXPECT_EQ(r.exit_code, 2) << c.name;
    const size_t first = r.output.find(c.says);
    EXPECT_EQ(r.output.find(c.says, first + 1), std::string::npos) << c.name << ": said twice";
    EXPECT_FALSE(fs::exists(dir / c.name)) << c.name << ": its work_dir was created";
  }
}

}  // namespace
