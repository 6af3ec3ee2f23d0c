// `runner-host ckpt` on real checkpoints (written by 2-rank zero and fsdp
// runs through the binary):
// - inspect lists every logical tensor with its shards, verifies, and exits
//   1 naming the file and the tensor for a corrupted, truncated or missing
//   shard file;
// - consolidate turns fsdp's sharded state dict into exactly the bytes of
//   the full state dict of the same run;
// - convert --to torch writes what Python's torch.load reads as a dict of
//   the same tensors (/usr/bin/python3 with torch: a failure under CI
//   when missing, a skip on a developer machine without it);
// - bad usage exits 2 and says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "common/DistributedTestUtil.hpp"
#include "common/PythonTorch.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;

namespace {

std::string gpt_job(const std::string& strategy, int iters, const std::string& extra = "") {
  return "seed: 3\n"
         "model: {type: gpt, vocab_size: 96, block_size: 16, dim: 32, depth: 2, heads: 2, "
         "dropout: 0.1, frozen: [blocks.0.norm1]}\n"
         "data:\n"
         "  train: {dataset: {type: char_lm, path: " +
         std::string(RH_TEST_TEXT) +
         ", block_size: 16, split: train},\n"
         "          batch_size: 4, shuffle: true, num_workers: 0}\n"
         "optim_wrapper:\n"
         "  optimizer: {type: AdamW, lr: 0.003}\n"
         "train_cfg: {by_epoch: false, max_iters: " +
         std::to_string(iters) + "}\nstrategy: " + strategy +
         "\nhooks:\n  - {type: checkpoint, by_epoch: false, interval: " + std::to_string(iters) +
         "}\ndist: {timeout_s: 30}\n" + extra;
}

class CkptToolTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult ckpt(const std::string& args) {
    return rh::test::run_command("env -u RH_PLUGIN_PATH " + quote(RH_RUNNER_HOST) + " ckpt " +
                                 args);
  }
  // A zero stage 2 checkpoint of 2 ranks (trained once for the suite),
  // copied to dir/zero/iter_3.
  fs::path zero_checkpoint() {
    if (!shared_) {
      shared_ = std::make_unique<rh::test::TempDir>();
      auto r = rh::test::run_job(*shared_, "zero",
                                 gpt_job("{type: zero, zero_optimization: {stage: 2}}", 3), 2);
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    fs::create_directories(dir / "zero");
    fs::copy(*shared_ / "zero" / "iter_3", dir / "zero" / "iter_3", fs::copy_options::recursive);
    return dir / "zero" / "iter_3";
  }
  static void TearDownTestSuite() { shared_.reset(); }
  static std::unique_ptr<rh::test::TempDir> shared_;
  static void flip_last_byte(const fs::path& file) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
};

std::unique_ptr<rh::test::TempDir> CkptToolTest::shared_;

TEST_F(CkptToolTest, InspectListsEveryTensorAndItsShardsAndVerifies) {
  const fs::path at = zero_checkpoint();
  auto r = ckpt("inspect " + quote(at.string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("iteration 3, written by zero on 2 rank(s) through safetensors"));
  EXPECT_THAT(r.output, HasSubstr("master.blocks.1.attn.qkv.weight  F32 [96, 32]"));
  EXPECT_THAT(r.output, HasSubstr("optim.head.fc.weight.exp_avg  F32 [96, 32]"));
  EXPECT_THAT(r.output,
              HasSubstr("model.blocks.0.norm1.weight  F32 [32]  1 shard(s): model [0, 32)"));
  EXPECT_THAT(r.output, HasSubstr("optimizer.rank1 ["));
  EXPECT_THAT(r.output, HasSubstr("ok: every file verifies and every shard matches its checksum"));
}

TEST_F(CkptToolTest, InspectNamesTheFileAndTensorOfADamagedShard) {
  const fs::path at = zero_checkpoint();
  const fs::path rank1 = at / "optimizer.rank1.safetensors";
  const std::string intact = rh::test::read_file(rank1);
  flip_last_byte(rank1);  // the data of the last tensor in the file
  auto corrupted = ckpt("inspect " + quote(at.string()));
  EXPECT_EQ(corrupted.exit_code, 1) << corrupted.output;
  EXPECT_THAT(corrupted.output, HasSubstr("damaged: " + rank1.string()));
  EXPECT_THAT(corrupted.output, HasSubstr("checksum mismatch in tensor"));
  EXPECT_THAT(corrupted.output, HasSubstr("(a shard of '"));

  std::ofstream(rank1, std::ios::binary | std::ios::trunc) << intact.substr(0, intact.size() / 2);
  auto truncated = ckpt("inspect " + quote(at.string()));
  EXPECT_EQ(truncated.exit_code, 1) << truncated.output;
  EXPECT_THAT(truncated.output, HasSubstr(rank1.string()));
  EXPECT_THAT(truncated.output, HasSubstr("truncated"));

  fs::remove(rank1);
  auto missing = ckpt("inspect " + quote(at.string()));
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr(rank1.string()));
  EXPECT_THAT(missing.output, HasSubstr("(reading shards of 'master."));
  EXPECT_THAT(missing.output, HasSubstr("(it holds shards of "));  // the file's check
  // resume: auto passes over it naming the file and what it holds.
  auto resumed = rh::test::run_job(
      dir, "zero", gpt_job("{type: zero, zero_optimization: {stage: 2}}", 4, "resume: auto\n"), 2);
  EXPECT_THAT(resumed.output, HasSubstr("skipping invalid checkpoint " + at.string()));
  EXPECT_THAT(resumed.output, HasSubstr(rank1.string()));
  EXPECT_THAT(resumed.output, HasSubstr("(it holds shards of "));
}

// The same run saved both ways: the sharded one consolidates to the full
// one's model file, byte for byte.
TEST_F(CkptToolTest, ConsolidateEqualsTheFullStateDictOfTheSameRun) {
  auto sharded = rh::test::run_job(
      dir, "sharded",
      gpt_job("{type: fsdp, sharding_strategy: full_shard, state_dict_type: sharded}", 3), 2);
  ASSERT_EQ(sharded.exit_code, 0) << sharded.output;
  auto full =
      rh::test::run_job(dir, "full", gpt_job("{type: fsdp, sharding_strategy: full_shard}", 3), 2);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const fs::path out = dir / "consolidated.safetensors";
  auto r = ckpt("consolidate " + quote((dir / "sharded/iter_3").string()) + " -o " +
                quote(out.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("wrote " + out.string()));
  rh::test::expect_equal_bytes(dir / "full/iter_3/model.safetensors", out);
  // An unsharded checkpoint consolidates to its own model file.
  const fs::path again = dir / "again.safetensors";
  ASSERT_EQ(
      ckpt("consolidate " + quote((dir / "full/iter_3").string()) + " -o " + quote(again.string()))
          .exit_code,
      0);
  rh::test::expect_equal_bytes(dir / "full/iter_3/model.safetensors", again);
}

TEST_F(CkptToolTest, ConvertToTorchIsADictThatTorchLoadReads) {
  const fs::path at = zero_checkpoint();
  const fs::path pt = dir / "model.pt", st = dir / "model.safetensors";
  auto r = ckpt("convert " + quote(at.string()) + " --to torch -o " + quote(pt.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(ckpt("consolidate " + quote(at.string()) + " -o " + quote(st.string())).exit_code, 0);
  RH_REQUIRE_PYTHON_TORCH(RH_INSTALL_DEPS);  // fails under CI when missing
  // torch.load gives a dict whose every tensor equals the safetensors file's,
  // also with weights_only=True (PyTorch 2.6's default; 1.13 has the
  // argument): a plain dict of tensors, no LibTorch type tag.
  dir.write(
      "check.py",
      "import json, struct, sys, torch\n"
      "d = torch.load(sys.argv[1], weights_only=True)\n"
      "assert isinstance(d, dict), type(d)\n"
      "raw = open(sys.argv[2], 'rb').read()\n"
      "n = struct.unpack('<Q', raw[:8])[0]\n"
      "header = json.loads(raw[8:8 + n])\n"
      "names = [k for k in header if k != '__metadata__']\n"
      "assert sorted(names) == sorted(d), (sorted(names), sorted(d))\n"
      "for k in names:\n"
      "    b, e = header[k]['data_offsets']\n"
      "    want = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + e]), dtype=torch.float32)\n"
      "    assert torch.equal(d[k].flatten(), want), k\n"
      "    assert list(d[k].shape) == header[k]['shape'], k\n"
      "print('torch.load read', len(d), 'tensors')\n");
  auto py = rh::test::run_command("/usr/bin/python3 " + quote((dir / "check.py").string()) + " " +
                                  quote(pt.string()) + " " + quote(st.string()));
  EXPECT_EQ(py.exit_code, 0) << py.output;
  EXPECT_THAT(py.output, HasSubstr("torch.load read"));
}

// convert --to hf: a llama trained under fsdp on 2 ranks (grouped-query
// attention, Llama 3's rope_theta) as Hugging Face's LlamaForCausalLM loads
// it. hf_llama_reader.py parses the files itself, checks every name, shape
// and config value, and runs transformers' forward (rotate_half rotary
// embeddings) on them against Meta's reference (interleaved pairs) on the
// --to torch file of the same checkpoint, both in float64: their logits
// differ by float64 rounding only, so 1e-9, where leaving wq / wk
// unpermuted moves them by 2.3e-4 (measured by breaking the converter so).
// LlamaTest ties Meta's reference to runner-host's forward within 1e-10.
TEST_F(CkptToolTest, ConvertToHfIsWhatHuggingFacesLlamaComputes) {
  const std::string job =
      "seed: 4\n"
      "model: {type: llama, vocab_size: 96, dim: 32, n_layers: 2, n_heads: 4, n_kv_heads: 2, "
      "multiple_of: 16, rope_theta: 500000, norm_eps: 1.0e-6, max_seq_len: 16}\n"
      "data:\n"
      "  train: {dataset: {type: char_lm, path: " +
      std::string(RH_TEST_TEXT) +
      ", block_size: 16, split: train},\n"
      "          batch_size: 4, shuffle: true, num_workers: 0}\n"
      "optim_wrapper: {optimizer: {type: AdamW, lr: 0.003}}\n"
      "train_cfg: {by_epoch: false, max_iters: 3}\nstrategy: {type: fsdp}\n"
      "hooks:\n  - {type: checkpoint, by_epoch: false, interval: 3}\ndist: {timeout_s: 30}\n";
  auto run = rh::test::run_job(dir, "llama", job, 2);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const fs::path at = dir / "llama" / "iter_3", hf = dir / "hf", pt = dir / "llama.pt";
  auto r = ckpt("convert " + quote(at.string()) + " --to hf -o " + quote(hf.string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("model.safetensors (21 tensor(s) under Hugging Face's names"));
  ASSERT_TRUE(fs::exists(hf / "config.json"));
  ASSERT_EQ(
      ckpt("convert " + quote(at.string()) + " --to torch -o " + quote(pt.string())).exit_code, 0);
  // Sharded as save_pretrained shards (files of at most 40 kB, an index).
  const fs::path sharded = dir / "hf_sharded";
  r = ckpt("convert " + quote(at.string()) + " --to hf -o " + quote(sharded.string()) +
           " --max-shard-size 40KB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("safetensors files with model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(sharded / "model-00001-of-00004.safetensors")) << r.output;
  EXPECT_FALSE(fs::exists(sharded / "model.safetensors"));
  RH_REQUIRE_PYTHON_TORCH(RH_INSTALL_DEPS);
  for (const fs::path& out : {hf, sharded}) {
    auto py = rh::test::run_command("/usr/bin/python3 " + quote(RH_HF_LLAMA_READER) + " " +
                                    quote(out.string()) + " " + quote(pt.string()) + " 1e-9");
    EXPECT_EQ(py.exit_code, 0) << py.output;
    EXPECT_THAT(py.output, HasSubstr("max |HF layout - Meta reference|"));
    std::cout << py.output;  // the difference, for the log
  }
}

TEST_F(CkptToolTest, ConvertToHfRefusesAModelThatIsNotALlama) {
  const fs::path at = zero_checkpoint();
  auto r = ckpt("convert " + quote(at.string()) + " --to hf -o " + quote((dir / "hf").string()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--to hf converts a llama checkpoint (model.type llama, Hugging "
                                  "Face's LlamaForCausalLM); this one's model is 'gpt'"));
  EXPECT_FALSE(fs::exists(dir / "hf")) << "nothing is written for a refused conversion";
}

TEST_F(CkptToolTest, BadUsageSaysWhy) {
  struct Case {
    std::string args, message;
    int exit_code;
  };
  for (const Case& c :
       {Case{"", "no command", 2}, Case{"list x", "unknown command 'list'", 2},
        Case{"consolidate x", "consolidate needs -o", 2},
        Case{"convert x -o y.pt", "convert needs --to torch or --to hf", 2},
        Case{"convert x --to onnx -o y", "(got 'onnx')", 2},
        Case{"convert x --to torch -o y --max-shard-size 5GB",
             "--max-shard-size is for convert --to hf", 2},
        Case{"convert x --to hf -o y --max-shard-size 5XB",
             "--max-shard-size: expected a positive size such as 5GB", 2},
        Case{"inspect a b", "inspect takes one checkpoint directory", 2},
        Case{"inspect " + (dir / "nothing").string(), "no such checkpoint directory", 1}}) {
    auto r = ckpt(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.args << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.args;
  }
}

// Checkpoint IO `torch`: .pt files Python's torch.load reads; a resume
// continues bit for bit, and another world size reads them whole (no
// LoadSlices); a truncated one is named and skipped.
TEST_F(CkptToolTest, TorchCheckpointIoResumesReshardsAndIsReadByTorchLoad) {
  const std::string zero = "{type: zero, zero_optimization: {stage: 2}}";
  const std::string io = "checkpoint_io: {type: torch}\n";
  auto straight = rh::test::run_job(dir, "straight", gpt_job(zero, 6, io), 2);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  auto first = rh::test::run_job(dir, "first", gpt_job(zero, 3, io), 2);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  for (const char* f : {"model.pt", "optimizer.rank0.pt", "optimizer.rank1.pt", "state.pt"})
    EXPECT_TRUE(fs::exists(dir / "first/iter_3" / f)) << f;
  auto resumed = rh::test::run_job(
      dir, "resumed", gpt_job(zero, 6, io + "resume: " + (dir / "first/iter_3").string() + "\n"),
      2);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  // Bit for bit: the same weights, through the tool.
  for (const std::string run : {"straight", "resumed"})
    ASSERT_EQ(ckpt("consolidate " + quote((dir / run / "iter_6").string()) + " -o " +
                   quote((dir / (run + ".safetensors")).string()))
                  .exit_code,
              0);
  rh::test::expect_equal_bytes(dir / "straight.safetensors", dir / "resumed.safetensors");
  // One rank with the global batch of 8 reads both ranks' files whole.
  std::string single =
      gpt_job("{type: single}", 4, io + "resume: " + (dir / "first/iter_3").string() + "\n");
  single.replace(single.find("batch_size: 4"), 13, "batch_size: 8");
  auto one = rh::test::run_job(dir, "one", single, 1);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_THAT(one.output, HasSubstr("resharded to 1 rank(s)"));
  // torch.load reads the .pt files (fails under CI without Python's torch,
  // passes without this part on a developer machine that lacks it).
  if (const auto missing = rh::test::missing_python_torch(RH_INSTALL_DEPS)) {
    if (missing->fails) ADD_FAILURE() << missing->reason;
  } else {
    auto py = rh::test::run_command(
        "/usr/bin/python3 -c \"import sys, torch; d = torch.load(sys.argv[1], weights_only=True); "
        "assert isinstance(d, dict); assert d['head.fc.weight'].shape == (96, 32); "
        "print('keys', len(d))\" " +
        quote((dir / "first/iter_3/model.pt").string()));
    EXPECT_EQ(py.exit_code, 0) << py.output;
    EXPECT_THAT(py.output, HasSubstr("keys"));
  }
  const fs::path pt = dir / "first/iter_3/optimizer.rank1.pt";
  const std::string bytes = rh::test::read_file(pt);
  std::ofstream(pt, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 100);
  auto damaged = ckpt("inspect " + quote((dir / "first/iter_3").string()));
  EXPECT_EQ(damaged.exit_code, 1) << damaged.output;
  EXPECT_THAT(damaged.output, HasSubstr(pt.string() + ": not a readable torch.save file"));
}

}  // namespace
