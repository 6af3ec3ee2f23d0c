// Checkpoint IO `async` end to end, through the runner-host binary: the
// checkpoint a background save publishes is the one a synchronous save
// writes (the snapshot is not changed by the training that goes on), its
// after_save_checkpoint comes at a later iteration boundary, removals wait
// for the publish, and a full disk during the write fails the run and keeps
// the previous checkpoint.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;

namespace {

// 24 samples in batches of 4: 6 iterations per epoch.
const char* const kJob =
    "seed: 3\n"
    "model: {type: mlp, in_features: 8, hidden: [64], num_classes: 3}\n"
    "data:\n"
    "  train: {dataset: {type: synthetic_classification, num_samples: 24, num_features: 8,\n"
    "          num_classes: 3}, batch_size: 4, shuffle: true, num_workers: 0}\n"
    "optim_wrapper: {optimizer: {type: SGD, lr: 0.1, momentum: 0.9}}\n";
const char* const kAsync = "checkpoint_io: {type: async, inner: {type: safetensors}}\n";

class AsyncCheckpointTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  // Runs a job of kJob plus `extra` in work dir `work`; `env` goes first,
  // and before it the shell commands `shell` (e.g. kTwoKiBFiles).
  rh::test::CommandResult run(const std::string& extra, const std::string& work,
                              const std::string& env = "", const std::string& args = "",
                              const std::string& shell = "") {
    const std::string file = work + ".yaml";
    dir.write(file, "work_dir: " + (dir / work).string() + "\n" + kJob + extra);
    return rh::test::run_command("cd " + quote(dir.path().string()) + " && " + shell +
                                 " env -u RH_PLUGIN_PATH " + env + " " + quote(RH_RUNNER_HOST) +
                                 " --config " + file + " " + args);
  }
  // Files may grow to 2 KiB only (EFBIG beyond, as on a full disk).
  static constexpr const char* kTwoKiBFiles = "trap '' XFSZ && ulimit -f 2 &&";
  // meta.json's tensor table: every shard with its checksum.
  std::string tensor_table(const fs::path& ckpt) const {
    const std::string meta = rh::test::read_file(ckpt / "meta.json");
    const size_t from = meta.find("\"tensors\":");
    const size_t to = meta.find("\"config\":");
    EXPECT_NE(from, std::string::npos) << meta;
    EXPECT_NE(to, std::string::npos) << meta;
    return meta.substr(from, to - from);
  }
  // The trace's lines of `event`, and the line number of each.
  std::vector<std::pair<size_t, std::string>> lines(const std::string& work,
                                                    const std::string& event) const {
    std::istringstream in(rh::test::read_file(dir / work / "trace.log"));
    std::vector<std::pair<size_t, std::string>> out;
    size_t n = 0;
    for (std::string line; std::getline(in, line); ++n)
      if (line.rfind(event + " ", 0) == 0) out.emplace_back(n, line);
    return out;
  }
};

const char* const kEvery2 =
    "train_cfg: {by_epoch: false, max_iters: 8}\n"
    "hooks:\n"
    "  - {type: trace, path: trace.log}\n"
    "  - {type: checkpoint, by_epoch: false, interval: 2}\n";
// Each file's write waits 300 ms: the next iterations run meanwhile and
// change every parameter the snapshot copied.
const char* const kSlowWrites = "RH_FAULT_INJECT=async_write_delay_ms:300";

TEST_F(AsyncCheckpointTest, PublishesWhatASynchronousSaveWritesAndFiresAfterSaveLater) {
  auto sync = run(kEvery2, "sync");
  ASSERT_EQ(sync.exit_code, 0) << sync.output;
  auto async = run(std::string(kEvery2) + kAsync, "async", kSlowWrites);
  ASSERT_EQ(async.exit_code, 0) << async.output;
  EXPECT_THAT(async.output, HasSubstr("written and published in the background"));
  EXPECT_THAT(async.output, HasSubstr("in the background, "));
  for (const char* name : {"iter_2", "iter_4", "iter_6", "iter_8"}) {
    SCOPED_TRACE(name);
    const fs::path a = dir / "async" / name, s = dir / "sync" / name;
    // The same tensors, byte for byte: the training that went on while the
    // files were written did not reach the snapshot.
    EXPECT_EQ(tensor_table(a), tensor_table(s));
    for (const char* file : {"model.safetensors", "optimizer.safetensors", "state.safetensors"})
      EXPECT_TRUE(rh::test::read_file(a / file) == rh::test::read_file(s / file)) << file;
    // No report or temporary file left inside.
    for (const auto& e : fs::directory_iterator(a))
      EXPECT_THAT(e.path().filename().string(),
                  ::testing::AnyOf("meta.json", "model.safetensors", "optimizer.safetensors",
                                   "state.safetensors"));
  }
  EXPECT_EQ(rh::test::read_file(dir / "async/latest"), "iter_8\n");
  // Synchronous: after_save_checkpoint of iter_2 right after its
  // before_save_checkpoint. In the background: only at an iteration boundary
  // after it, so after the next iteration began (the third, iter=2).
  auto sync_after = lines("sync", "after_save_checkpoint");
  auto async_after = lines("async", "after_save_checkpoint");
  auto async_before = lines("async", "before_save_checkpoint");
  auto async_iters = lines("async", "before_train_iter");
  ASSERT_EQ(sync_after.size(), 4u);
  ASSERT_EQ(async_after.size(), 4u);
  ASSERT_EQ(async_before.size(), 4u);
  EXPECT_THAT(async_after[0].second, HasSubstr("/iter_2"));
  EXPECT_THAT(async_after[3].second, HasSubstr("/iter_8"));
  ASSERT_GE(async_iters.size(), 3u);
  EXPECT_GT(async_after[0].first, async_iters[2].first);
  EXPECT_THAT(async_iters[2].second, HasSubstr("iter=2"));
  // One save in flight at a time: each published before the next begins.
  for (size_t i = 0; i + 1 < async_after.size(); ++i)
    EXPECT_LT(async_after[i].first, async_before[i + 1].first);
  // The checkpoint resumes: 4 more iterations from iter_8 give what an
  // uninterrupted synchronous run of 12 gives.
  const std::string twelve =
      "train_cfg: {by_epoch: false, max_iters: 12}\n"
      "hooks:\n"
      "  - {type: checkpoint, by_epoch: false, interval: 12}\n";
  auto resumed = run(std::string(twelve) + kAsync + "resume: auto\n", "async");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("resumed from " + (dir / "async/iter_8").string()));
  auto straight = run(twelve, "straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_EQ(tensor_table(dir / "async/iter_12"), tensor_table(dir / "straight/iter_12"));
}

TEST_F(AsyncCheckpointTest, RemovalsWaitForThePublish) {
  // max_keep_ckpts: 1 asks to remove the previous checkpoint right after
  // each save is asked for, while `latest` still names it: done once the
  // new one is published, never refused.
  std::string keep_one = std::string(kEvery2) + kAsync;
  keep_one.replace(keep_one.find("interval: 2}"), 12, "interval: 2, max_keep_ckpts: 1}");
  auto r = run(keep_one, "keep", kSlowWrites);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("could not remove")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("refusing")));
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(dir / "keep"))
    if (e.is_directory()) kept.push_back(e.path().filename().string());
  EXPECT_THAT(kept, ::testing::ElementsAre("iter_8"));
  EXPECT_EQ(rh::test::read_file(dir / "keep/latest"), "iter_8\n");
}

TEST_F(AsyncCheckpointTest, AFullDiskDuringTheWriteFailsTheRunAndKeepsThePreviousCheckpoint) {
  const std::string epochs =
      "train_cfg: {by_epoch: true, max_epochs: 1}\n"
      "hooks:\n"
      "  - {type: checkpoint}\n";
  auto first = run(epochs + kAsync, "work");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string epoch_1 = tensor_table(dir / "work/epoch_1");
  // Files may grow to 2 KiB: epoch 2's model file (3 KiB) cannot be written
  // (EFBIG, as on a full disk), in the background.
  std::string more = epochs + kAsync + "resume: auto\n";
  more.replace(more.find("max_epochs: 1"), 13, "max_epochs: 2");
  auto r = run(more, "work", "", "", kTwoKiBFiles);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex(
                            "checkpoint 'epoch_2' failed in the background: .*File too large"));
  EXPECT_FALSE(fs::exists(dir / "work/epoch_2"));
  EXPECT_EQ(rh::test::read_file(dir / "work/latest"), "epoch_1\n");
  for (const auto& e : fs::directory_iterator(dir / "work"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // The previous checkpoint is as it was, and still resumes.
  EXPECT_EQ(tensor_table(dir / "work/epoch_1"), epoch_1);
  auto again = run(more, "work");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("resumed from " + (dir / "work/epoch_1").string()));
}

// Inner `torch` has no LoadSlices: CheckpointIo_LoadSlices answers
// UNIMPLEMENTED through async, and the resume loads whole files instead.
TEST_F(AsyncCheckpointTest, WrapsACheckpointIoThatReadsWholeFilesOnly) {
  const std::string torch_io = "checkpoint_io: {type: async, inner: {type: torch}}\n";
  auto first = run(std::string(kEvery2) + torch_io, "t");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_TRUE(fs::exists(dir / "t/iter_8/model.pt"));
  const std::string twelve =
      "train_cfg: {by_epoch: false, max_iters: 12}\n"
      "hooks:\n"
      "  - {type: checkpoint, by_epoch: false, interval: 12}\n";
  auto resumed = run(twelve + torch_io + "resume: auto\n", "t");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_THAT(resumed.output, HasSubstr("resumed from " + (dir / "t/iter_8").string()));
  auto straight = run(twelve + "checkpoint_io: {type: torch}\n", "straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_EQ(tensor_table(dir / "t/iter_12"), tensor_table(dir / "straight/iter_12"));
}

// The torch checkpoint IO writes its zip archive straight to the file: a
// write that fails (EFBIG, as on a full disk) is an error naming the file,
// never a crash in the zip writer, and the previous checkpoint stays.
TEST_F(AsyncCheckpointTest, ATorchFileThatCannotBeWrittenFailsTheSaveAndKeepsThePrevious) {
  const std::string torch_io = "checkpoint_io: {type: torch}\n";
  const std::string epochs =
      "train_cfg: {by_epoch: true, max_epochs: 1}\n"
      "hooks:\n"
      "  - {type: checkpoint}\n";
  auto first = run(epochs + torch_io, "tw");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string model_1 = rh::test::read_file(dir / "tw/epoch_1/model.pt");
  std::string more = epochs + torch_io + "resume: auto\n";
  more.replace(more.find("max_epochs: 1"), 13, "max_epochs: 2");
  auto r = run(more, "tw", "", "", kTwoKiBFiles);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output,
              ::testing::ContainsRegex(
                  "torch checkpoint IO: cannot write .*/model\\.pt\\.tmp: File too large"));
  EXPECT_FALSE(fs::exists(dir / "tw/epoch_2"));
  EXPECT_EQ(rh::test::read_file(dir / "tw/latest"), "epoch_1\n");
  EXPECT_EQ(rh::test::read_file(dir / "tw/epoch_1/model.pt"), model_1);
  for (const auto& e : fs::directory_iterator(dir / "tw"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST_F(AsyncCheckpointTest, ConfigMistakesAreNamed) {
  const std::string hooks = "train_cfg: {by_epoch: false, max_iters: 2}\nhooks: []\n";
  auto missing = run(hooks + "checkpoint_io: {type: async}\n", "a");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("missing required key 'inner'"));
  EXPECT_THAT(missing.output, HasSubstr("checkpoint_io"));
  // The inner component's keys are checked as the job's checkpoint_io: are.
  auto typo = run(
      hooks + "checkpoint_io: {type: async, inner: {type: safetensors, checksums: false}}\n", "b");
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_THAT(typo.output, HasSubstr("checkpoint_io.inner.checksums"));
  EXPECT_THAT(typo.output, HasSubstr("did you mean 'checksum'"));
  auto unknown = run(hooks + "checkpoint_io: {type: async, inner: {type: zip}}\n", "c");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("checkpoint_io.inner.type"));
  EXPECT_THAT(unknown.output, HasSubstr("no checkpoint_io plugin provides type 'zip'"));
}

}  // namespace
