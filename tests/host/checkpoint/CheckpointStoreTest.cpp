// CheckpointStore (host/checkpoint): replacing a checkpoint is atomic even
// when the process is killed at any step of the publish; names read from disk
// (`latest`, meta.json's stems) are validated, never followed blindly; one
// name rule for save, remove and resume; the digest of meta.json.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <list>

#include "checkpoint/CheckpointStore.hpp"
#include "common/LogCapture.hpp"
#include "common/PluginTestHost.hpp"

namespace rh::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

std::string meta_of(int64_t iter, const std::string& files = "[\"model\"]") {
  return "{\"format_version\": 1, \"iter\": " + std::to_string(iter) + ", \"files\": " + files +
         "}\n";
}

// A pid that belonged to a process which has exited (and been reaped).
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

class CheckpointStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_.load("rh_ckpt_io_safetensors");
    io_ = host_.create_checkpoint_io("{type: safetensors}");
    store_ = std::make_unique<checkpoint::CheckpointStore>(work(), *io_);
  }
  void TearDown() override { unsetenv("RH_FAULT_INJECT"); }

  fs::path work() const { return host_.dir / "work"; }

  // Saves checkpoint `name` whose model holds w = [value, value].
  void save(const std::string& name, float value, int64_t iter) {
    store_->save(name, {{"model", &model_dict(value)}}, meta_of(iter));
  }
  rh_StateDict& model_dict(float value) {
    dicts_.emplace_back();
    rh_StateDict& dict = dicts_.back();
    float data[2] = {value, value};
    int64_t shape[1] = {2};
    DLManagedTensor t{};
    t.dl_tensor.data = data;
    t.dl_tensor.device = {kDLCPU, 0};
    t.dl_tensor.ndim = 1;
    t.dl_tensor.dtype = {kDLFloat, 32, 1};
    t.dl_tensor.shape = shape;
    rh_Error* err = host_.api()->StateDict_PutTensor(&dict, "w", 1, &t);
    EXPECT_EQ(err, nullptr);
    delete err;
    return dict;
  }
  // w[0] of the checkpoint in `dir`.
  float value_of(const fs::path& dir) {
    rh_StateDict dict;
    store_->load(dir, "model", dict);
    const auto& e = dict.entries.at("w");
    float v = 0;
    std::memcpy(&v, e.data(), sizeof v);
    return v;
  }

  PluginTestHost host_;
  std::unique_ptr<host::CheckpointIoInstance> io_;
  std::unique_ptr<checkpoint::CheckpointStore> store_;
  std::list<rh_StateDict> dicts_;
};

TEST_F(CheckpointStoreTest, SavePublishesTheCheckpointAndPointsLatestAtIt) {
  save("epoch_1", 1, 10);
  EXPECT_EQ(store_->verify(work() / "epoch_1"), "");
  EXPECT_EQ(store_->latest(), "epoch_1");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "latest"}));
}

TEST_F(CheckpointStoreTest, ReplacingACheckpointLeavesOnlyTheNewOne) {
  save("last", 1, 10);
  save("other", 5, 5);
  save("last", 2, 20);
  EXPECT_EQ(value_of(work() / "last"), 2);
  EXPECT_EQ(store_->verify(work() / "last"), "");
  EXPECT_EQ(store_->latest(), "last");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"last", "latest", "other"}));
}

// A save over an existing checkpoint killed (SIGKILL) at every step of the
// publish: the checkpoint of that name is always complete (the old one
// before the exchange, the new one after), `latest` names one that verifies,
// resume finds a valid one, the leftovers do not confuse it, and the next
// save of that name removes them.
TEST_F(CheckpointStoreTest, AKillAtAnyStepOfTheReplacementLeavesACompleteCheckpoint) {
  struct Step {
    const char* name;
    float expected;       // the value of "last" afterwards: old 1, new 2
    const char* resumes;  // what resume takes: `latest` until it moved on
  };
  const Step steps[] = {{"files_written", 1, "epoch_1"},      {"meta_written", 1, "epoch_1"},
                        {"latest_tmp_written", 1, "epoch_1"}, {"exchanged", 2, "epoch_1"},
                        {"latest_updated", 2, "last"},        {"old_removed", 2, "last"}};
  for (const Step& step : steps) {
    SCOPED_TRACE(step.name);
    fs::remove_all(work());
    save("epoch_1", 5, 5);
    save("last", 1, 10);
    save("epoch_1", 5, 5);  // `latest` names another checkpoint at the start
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      setenv("RH_FAULT_INJECT", (std::string("ckpt_publish:") + step.name).c_str(), 1);
      try {
        save("last", 2, 20);
      } catch (...) {
        _exit(4);
      }
      _exit(3);  // the fault point did not fire
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGKILL);

    EXPECT_EQ(store_->verify(work() / "last"), "");
    EXPECT_EQ(value_of(work() / "last"), step.expected);
    const std::string latest = store_->latest();
    EXPECT_EQ(store_->latest_problem(), "");
    ASSERT_FALSE(latest.empty());
    EXPECT_EQ(store_->verify(work() / latest), "");
    std::vector<std::string> skipped;
    auto resumable = store_->find_resumable(&skipped);
    ASSERT_TRUE(resumable.has_value());
    EXPECT_EQ(store_->verify(*resumable), "");
    EXPECT_TRUE(skipped.empty()) << skipped.front();
    EXPECT_EQ(resumable->filename(), step.resumes);

    save("last", 3, 30);
    EXPECT_EQ(value_of(work() / "last"), 3);
    EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "last", "latest"}));
  }
}

TEST_F(CheckpointStoreTest, AKillAtAnyStepOfAFirstSaveLeavesTheEarlierCheckpoints) {
  for (const char* step : {"files_written", "meta_written", "latest_tmp_written", "exchanged",
                           "latest_updated", "old_removed"}) {
    SCOPED_TRACE(step);
    fs::remove_all(work());
    save("epoch_1", 5, 5);
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      setenv("RH_FAULT_INJECT", (std::string("ckpt_publish:") + step).c_str(), 1);
      try {
        save("epoch_2", 2, 20);
      } catch (...) {
        _exit(4);
      }
      _exit(3);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
    const std::string latest = store_->latest();
    ASSERT_FALSE(latest.empty());
    EXPECT_EQ(store_->verify(work() / latest), "");
    std::vector<std::string> skipped;
    auto resumable = store_->find_resumable(&skipped);
    ASSERT_TRUE(resumable.has_value());
    EXPECT_EQ(store_->verify(*resumable), "");
    EXPECT_TRUE(skipped.empty()) << skipped.front();
  }
}

// meta.json and latest.tmp are written before the plugin's flush (one
// journal commit for all): a flush that fails leaves no trace of them, and
// `latest` still names the earlier checkpoint.
TEST_F(CheckpointStoreTest, AFailedFlushLeavesNeitherMetaNorLatestTmpBehind) {
  save("epoch_1", 1, 10);
  setenv("RH_FAULT_INJECT", "ckpt_flush:fail", 1);
  try {
    save("epoch_2", 2, 20);
    FAIL() << "the save should have failed";
  } catch (const host::HostError& e) {
    EXPECT_THAT(e.what(), HasSubstr("checkpoint 'epoch_2': "));
    EXPECT_THAT(e.what(), HasSubstr("Flush: injected failure"));
  }
  unsetenv("RH_FAULT_INJECT");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "latest"}));
  EXPECT_EQ(store_->latest(), "epoch_1");
  EXPECT_EQ(store_->verify(work() / "epoch_1"), "");
}

TEST_F(CheckpointStoreTest, WithoutRenameExchangeTheReplacementStillWorks) {
  save("last", 1, 10);
  setenv("RH_FAULT_INJECT", "ckpt_no_exchange", 1);
  save("last", 2, 20);
  unsetenv("RH_FAULT_INJECT");
  EXPECT_EQ(value_of(work() / "last"), 2);
  EXPECT_EQ(store_->verify(work() / "last"), "");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"last", "latest"}));
}

// The documented fallback's window: killed between its two renames, no
// "last" exists, only the moved-aside previous one. Resume puts it back
// (the only copy of a published checkpoint; it used to stay hidden, and the
// next save of "last" deleted it) and takes what `latest` names.
TEST_F(CheckpointStoreTest, WithoutRenameExchangeAKillBetweenTheRenamesLeavesAResumableWorkDir) {
  save("last", 1, 10);
  save("epoch_1", 5, 5);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("RH_FAULT_INJECT", "ckpt_no_exchange,ckpt_publish:moved_aside", 1);
    try {
      save("last", 2, 20);
    } catch (...) {
      _exit(4);
    }
    _exit(3);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_FALSE(fs::exists(work() / "last"));
  std::vector<std::string> skipped;
  auto resumable = store_->find_resumable(&skipped);
  ASSERT_TRUE(resumable.has_value());
  EXPECT_EQ(*resumable, work() / "epoch_1");
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  ASSERT_EQ(store_->verify(work() / "last"), "");
  EXPECT_EQ(value_of(work() / "last"), 1);  // the previous one, back
  save("last", 3, 30);
  EXPECT_EQ(value_of(work() / "last"), 3);
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "last", "latest"}));
}

// Without RENAME_EXCHANGE, the new one's rename fails: the previous one is
// put back and the save fails saying so.
TEST_F(CheckpointStoreTest, WithoutRenameExchangeAFailedRenamePutsThePreviousOneBack) {
  save("last", 1, 10);
  setenv("RH_FAULT_INJECT", "ckpt_no_exchange,ckpt_rename:fail", 1);
  try {
    save("last", 2, 20);
    FAIL() << "the save should have failed";
  } catch (const host::HostError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot publish checkpoint " + (work() / "last").string() +
                                    " (the previous one is back in its place): "));
  }
  unsetenv("RH_FAULT_INJECT");
  EXPECT_EQ(value_of(work() / "last"), 1);
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"last", "latest"}));
}

// ... and putting the previous one back fails too: it stays at its
// temporary name, the only copy of a published checkpoint. The error says
// where; the next save (of another name here) puts it back instead of
// deleting it, and so does resume (next test).
TEST_F(CheckpointStoreTest, WithoutRenameExchangeAFailedRollbackKeepsThePreviousCheckpoint) {
  save("last", 1, 10);
  save("epoch_1", 5, 5);
  LogCapture log;
  setenv("RH_FAULT_INJECT", "ckpt_no_exchange,ckpt_rename:fail,ckpt_rollback:fail", 1);
  std::string message;
  try {
    save("last", 2, 20);
    FAIL() << "the save should have failed";
  } catch (const host::HostError& e) {
    message = e.what();
  }
  unsetenv("RH_FAULT_INJECT");
  const std::vector<std::string> after = names_in(work());
  ASSERT_EQ(after.size(), 3u) << ::testing::PrintToString(after);
  const std::string aside = after[1];  // epoch_1, last.tmp-<pid>-<n>-old, latest
  EXPECT_EQ(aside.rfind("last.tmp-" + std::to_string(::getpid()) + "-", 0), 0u) << aside;
  EXPECT_THAT(aside, ::testing::EndsWith("-old"));
  EXPECT_THAT(message, HasSubstr("cannot publish checkpoint " + (work() / "last").string() +
                                 ": cannot rename "));
  EXPECT_THAT(message, HasSubstr("; and the previous checkpoint 'last', moved aside to " +
                                 (work() / aside).string() + ", cannot be put back: "));
  EXPECT_THAT(message, HasSubstr("It is kept there, not removed: the next save or resume: auto "
                                 "puts it back"));
  EXPECT_EQ(value_of(work() / aside), 1);

  save("epoch_2", 3, 30);
  EXPECT_THAT(log.text(),
              HasSubstr("put checkpoint 'last' back from " + (work() / aside).string()));
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "epoch_2", "last", "latest"}));
  EXPECT_EQ(store_->verify(work() / "last"), "");
  EXPECT_EQ(value_of(work() / "last"), 1);
  save("last", 4, 40);  // and it is replaced as any checkpoint is
  EXPECT_EQ(value_of(work() / "last"), 4);
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "epoch_2", "last", "latest"}));
}

TEST_F(CheckpointStoreTest, WithoutRenameExchangeAFailedRollbackIsPutBackByResume) {
  save("epoch_1", 5, 5);
  save("last", 1, 10);  // `latest` names it
  setenv("RH_FAULT_INJECT", "ckpt_no_exchange,ckpt_rename:fail,ckpt_rollback:fail", 1);
  EXPECT_THROW(save("last", 2, 20), host::HostError);
  unsetenv("RH_FAULT_INJECT");
  EXPECT_FALSE(fs::exists(work() / "last"));
  std::vector<std::string> skipped;
  auto resumable = store_->find_resumable(&skipped);
  ASSERT_TRUE(resumable.has_value());
  EXPECT_EQ(*resumable, work() / "last");
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  EXPECT_EQ(value_of(work() / "last"), 1);
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "last", "latest"}));
}

// A moved-aside checkpoint of a live other process (its save in flight) is
// neither put back nor removed.
TEST_F(CheckpointStoreTest, AMovedAsideCheckpointOfALiveProcessIsLeftAlone) {
  save("last", 1, 10);
  fs::rename(work() / "last", work() / "last.tmp-1-0-old");  // pid 1 always runs
  std::vector<std::string> skipped;
  auto resumable = store_->find_resumable(&skipped);
  EXPECT_FALSE(resumable.has_value());
  save("last", 2, 20);
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"last", "last.tmp-1-0-old", "latest"}));
}

// Once the new checkpoint has its name, the save is done: a `latest` that
// cannot be replaced is a warning saying so, and the `latest` naming the
// older checkpoint is removed so that resume takes the newest one.
TEST_F(CheckpointStoreTest, ALatestThatCannotBeReplacedIsAWarningAndResumeTakesTheNewCheckpoint) {
  save("epoch_1", 1, 10);
  LogCapture log;
  setenv("RH_FAULT_INJECT", "ckpt_latest:fail", 1);
  EXPECT_EQ(store_->save("epoch_2", {{"model", &model_dict(2)}}, meta_of(20)), work() / "epoch_2");
  unsetenv("RH_FAULT_INJECT");
  EXPECT_THAT(
      log.text(),
      HasSubstr("[warning] checkpoint 'epoch_2' is published (" + (work() / "epoch_2").string() +
                "), but `latest` cannot name it: cannot "
                "rename " +
                (work() / "latest.tmp").string() + " to " + (work() / "latest").string() +
                ": Input/output error. `latest`, which "
                "named 'epoch_1', is removed, so that resume: auto takes the newest valid "
                "checkpoint by iteration rather than that one. The save counts as done; "
                "the run goes on"));
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "epoch_2"}));
  EXPECT_EQ(store_->verify(work() / "epoch_2"), "");
  std::vector<std::string> skipped;
  auto resumable = store_->find_resumable(&skipped);
  ASSERT_TRUE(resumable.has_value());
  EXPECT_EQ(*resumable, work() / "epoch_2");
  EXPECT_TRUE(skipped.empty()) << skipped.front();
  save("epoch_3", 3, 30);  // the next save points `latest` again
  EXPECT_EQ(store_->latest(), "epoch_3");
}

// ... and when that `latest` cannot be removed either, the warning says
// what resume: auto would take and how to take the new one.
TEST_F(CheckpointStoreTest, AStaleLatestThatCannotBeRemovedIsNamedInTheWarning) {
  save("epoch_1", 1, 10);
  LogCapture log;
  setenv("RH_FAULT_INJECT", "ckpt_latest:fail,ckpt_latest_remove:fail", 1);
  save("epoch_2", 2, 20);
  unsetenv("RH_FAULT_INJECT");
  EXPECT_THAT(log.text(),
              HasSubstr("checkpoint 'epoch_2' is published (" + (work() / "epoch_2").string() +
                        "), but `latest` still names 'epoch_1': cannot rename "));
  EXPECT_THAT(log.text(), HasSubstr("and it cannot be removed either: Input/output error. "
                                    "resume: auto would continue from 'epoch_1' until a later "
                                    "save updates `latest`; to continue from this checkpoint "
                                    "write 'epoch_2' into " +
                                    (work() / "latest").string() +
                                    " or set resume: " + (work() / "epoch_2").string()));
  EXPECT_EQ(store_->latest(), "epoch_1");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "epoch_2", "latest"}));
}

// Replacing the checkpoint `latest` already names: nothing to say but that.
TEST_F(CheckpointStoreTest, ALatestThatAlreadyNamesTheCheckpointStaysAsItIs) {
  save("last", 1, 10);
  LogCapture log;
  setenv("RH_FAULT_INJECT", "ckpt_latest:fail", 1);
  save("last", 2, 20);
  unsetenv("RH_FAULT_INJECT");
  EXPECT_THAT(log.text(),
              HasSubstr("checkpoint 'last' is published (" + (work() / "last").string() +
                        ") and `latest` already names it; rewriting it failed"));
  EXPECT_EQ(value_of(work() / "last"), 2);
  EXPECT_EQ(store_->latest(), "last");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"last", "latest"}));
}

// A real failure of the same kind: `latest` is a directory (someone made
// one), which rename(2) cannot replace and resume never follows.
TEST_F(CheckpointStoreTest, ALatestThatIsADirectoryDoesNotFailTheSave) {
  save("epoch_1", 1, 10);
  fs::remove(work() / "latest");
  fs::create_directories(work() / "latest" / "notes");
  LogCapture log;
  save("epoch_2", 2, 20);
  EXPECT_THAT(log.text(),
              HasSubstr("checkpoint 'epoch_2' is published (" + (work() / "epoch_2").string() +
                        "), but `latest` cannot name it: cannot rename "));
  EXPECT_THAT(log.text(), HasSubstr("It names no checkpoint (it is not a file, or its content "
                                    "is not a checkpoint name), so resume: auto ignores it and "
                                    "takes the newest valid checkpoint by iteration"));
  EXPECT_FALSE(fs::exists(work() / "latest.tmp"));
  auto resumable = store_->find_resumable(nullptr);
  ASSERT_TRUE(resumable.has_value());
  EXPECT_EQ(*resumable, work() / "epoch_2");
}

// The fsync of work_dir after the renames fails: published, `latest` names
// it, the replaced one is gone; a warning says the renames may not be
// durable.
TEST_F(CheckpointStoreTest, AWorkDirThatCannotBeFsyncedIsAWarning) {
  save("last", 1, 10);
  LogCapture log;
  setenv("RH_FAULT_INJECT", "ckpt_fsync_work_dir:fail", 1);
  save("last", 2, 20);
  unsetenv("RH_FAULT_INJECT");
  EXPECT_THAT(log.text(),
              HasSubstr("[warning] checkpoint 'last' is published (" + (work() / "last").string() +
                        "), but cannot fsync " + work().string() +
                        ": Input/output error: the renames that "
                        "published it may not survive a crash of the machine"));
  EXPECT_EQ(value_of(work() / "last"), 2);
  EXPECT_EQ(store_->latest(), "last");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"last", "latest"}));
}

TEST_F(CheckpointStoreTest, LeftoversOfAKilledSaveAreNeverResumedAndTheNextSaveRemovesThem) {
  save("epoch_1", 1, 10);
  // Complete checkpoints (a newer iteration) under temporary names: a dead
  // process's and a live one's (pid 1 always runs).
  const std::string dead = "epoch_2.tmp-" + std::to_string(dead_pid()) + "-0";
  const std::string live = "epoch_2.tmp-1-0";
  for (const std::string& name : {dead, live}) {
    fs::copy(work() / "epoch_1", work() / name, fs::copy_options::recursive);
    write_text(work() / name / "meta.json", meta_of(99));
  }
  fs::copy(work() / "epoch_1", work() / "epoch_1.old-123", fs::copy_options::recursive);
  write_text(work() / "epoch_1.old-123" / "meta.json", meta_of(98));
  fs::remove(work() / "latest");

  std::vector<std::string> skipped;
  auto resumable = store_->find_resumable(&skipped);
  ASSERT_TRUE(resumable.has_value());
  EXPECT_EQ(resumable->filename(), "epoch_1");
  EXPECT_TRUE(skipped.empty()) << skipped.front();

  save("epoch_2", 2, 20);
  EXPECT_EQ(names_in(work()),
            (std::vector<std::string>{"epoch_1", "epoch_1.old-123", "epoch_2", live, "latest"}));
}

// remove(): the checkpoint is gone from its name when the call returns (a
// temporary, never resumed from); its files are deleted on the remover's
// thread, and the next save begins once that is done.
TEST_F(CheckpointStoreTest, RemoveRenamesAtOnceDeletesInTheBackgroundAndTheNextSaveWaits) {
  save("epoch_1", 1, 10);
  save("epoch_2", 2, 20);
  setenv("RH_FAULT_INJECT", "ckpt_remove:slow", 1);  // each deletion waits 300 ms first
  store_->remove("epoch_1");
  EXPECT_FALSE(fs::exists(work() / "epoch_1"));
  const std::vector<std::string> during = names_in(work());
  ASSERT_EQ(during.size(), 3u);
  EXPECT_EQ(during[0].rfind("epoch_1.tmp-" + std::to_string(::getpid()) + "-", 0), 0u) << during[0];
  std::vector<std::string> skipped;
  auto resumable = store_->find_resumable(&skipped);
  ASSERT_TRUE(resumable.has_value());
  EXPECT_EQ(resumable->filename(), "epoch_2");
  EXPECT_TRUE(skipped.empty()) << skipped.front();

  save("epoch_3", 3, 30);
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_2", "epoch_3", "latest"}));
  store_->remove("epoch_2");
  store_.reset();  // the destructor waits for the deletion
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_3", "latest"}));
}

// A deletion that fails in the background is a warning; the checkpoint is
// already out of the names, and the next save of that name removes the
// leftover.
TEST_F(CheckpointStoreTest, AFailedBackgroundDeletionWarnsAndTheNextSaveOfThatNameRemovesIt) {
  LogCapture log;
  save("epoch_1", 1, 10);
  save("epoch_2", 2, 20);
  setenv("RH_FAULT_INJECT", "ckpt_remove:fail", 1);
  store_->remove("epoch_1");
  store_->wait_for_removals();
  EXPECT_THAT(log.text(), HasSubstr("cannot remove " + (work() / "epoch_1").string() + ".tmp-"));
  EXPECT_THAT(log.text(), HasSubstr("(checkpoint 'epoch_1', removed): Permission denied; the "
                                    "next save of that name removes it"));
  EXPECT_EQ(names_in(work()).size(), 3u);  // the leftover, epoch_2, latest
  EXPECT_FALSE(fs::exists(work() / "epoch_1"));
  unsetenv("RH_FAULT_INJECT");
  save("epoch_1", 1, 30);
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"epoch_1", "epoch_2", "latest"}));
}

TEST_F(CheckpointStoreTest, OneNameRuleForSaveRemoveAndResume) {
  for (const std::string& name :
       std::vector<std::string>{"epoch_1", "iter_100", "best_accuracy_top1_epoch_3", "last", "v1.2",
                                "_x", std::string(200, 'a')})
    EXPECT_TRUE(checkpoint::CheckpointStore::valid_name(name)) << name;
  for (const std::string& name : std::vector<std::string>{
           "", ".hidden", "latest", "latest.tmp", "x.tmp", "x.old-1", "x.tmp-3", "x.tmp-3-0", "a/b",
           "..", "../x", "a b", "-x", "caf\xc3\xa9", std::string(201, 'a')})
    EXPECT_FALSE(checkpoint::CheckpointStore::valid_name(name)) << name;

  try {
    save("x.old-1", 1, 1);
    FAIL() << "saved";
  } catch (const host::HostError& e) {
    EXPECT_EQ(e.code(), RH_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("'x.old-1' contains '.old-', reserved for temporaries"));
  }
  try {
    store_->remove("x.tmp-3");
    FAIL() << "removed";
  } catch (const host::HostError& e) {
    EXPECT_EQ(e.code(), RH_ERROR_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("'x.tmp-3' contains '.tmp-'"));
  }
  EXPECT_FALSE(fs::exists(work() / "x.old-1"));
}

TEST_F(CheckpointStoreTest, ACheckpointDoesNotReplaceAFile) {
  fs::create_directories(work());
  write_text(work() / "metrics.jsonl", "{}\n");
  try {
    save("metrics.jsonl", 1, 1);
    FAIL() << "saved";
  } catch (const host::HostError& e) {
    EXPECT_EQ(e.code(), RH_ERROR_FAILED_PRECONDITION);
    EXPECT_THAT(e.what(), HasSubstr("metrics.jsonl: something that is not a directory"));
  }
  EXPECT_EQ(read_file(work() / "metrics.jsonl"), "{}\n");
  EXPECT_EQ(names_in(work()), (std::vector<std::string>{"metrics.jsonl"}));
}

TEST_F(CheckpointStoreTest, LatestIsFollowedOnlyWhenItIsAPlainCheckpointName) {
  // A valid checkpoint outside work_dir that a crafted `latest` might name.
  checkpoint::CheckpointStore outside(host_.dir / "outside", *io_);
  outside.save("epoch_9", {{"model", &model_dict(9)}}, meta_of(90));
  save("epoch_1", 1, 10);
  save("epoch_2", 2, 20);
  for (const std::string& content : std::vector<std::string>{
           "../outside/epoch_9\n", (host_.dir / "outside" / "epoch_9").string() + "\n",
           "epoch_1/../epoch_1\n", "epoch_1.tmp-3\n", "epoch_1\nepoch_2\n", "..\n", "\n"}) {
    SCOPED_TRACE(content);
    write_text(work() / "latest", content);
    EXPECT_EQ(store_->latest(), "");
    EXPECT_THAT(store_->latest_problem(), HasSubstr((work() / "latest").string() +
                                                    ": ignored, its content is not a "
                                                    "checkpoint of " +
                                                    work().string()));
    std::vector<std::string> skipped;
    auto resumable = store_->find_resumable(&skipped);
    ASSERT_TRUE(resumable.has_value());
    EXPECT_EQ(*resumable, work() / "epoch_2");  // the newest valid one
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_THAT(skipped[0], HasSubstr("latest: ignored"));
  }
  // `latest` naming a checkpoint that is not latest-by-iteration is followed.
  write_text(work() / "latest", "epoch_1\n");
  EXPECT_EQ(store_->latest_problem(), "");
  EXPECT_EQ(*store_->find_resumable(nullptr), work() / "epoch_1");
  // remove() compares with the validated content.
  write_text(work() / "latest", "../epoch_1\n");
  store_->remove("epoch_1");
  EXPECT_FALSE(fs::exists(work() / "epoch_1"));
}

TEST_F(CheckpointStoreTest, FileStemsInMetaJsonAreValidated) {
  save("epoch_1", 1, 10);
  save("epoch_2", 2, 20);
  for (const std::string& stem :
       std::vector<std::string>{"../../etc/x", "/etc/passwd", "..", ".model", "a b", ""}) {
    SCOPED_TRACE(stem);
    write_text(work() / "epoch_2" / "meta.json", meta_of(20, "[\"model\", \"" + stem + "\"]"));
    const std::string why = store_->verify(work() / "epoch_2");
    EXPECT_EQ(why, "checkpoint " + (work() / "epoch_2").string() +
                       ": meta.json lists the file stem '" + stem +
                       "', which is not a plain file name ([A-Za-z0-9_.-], not starting with "
                       "'.'); refusing to read it");
    try {
      checkpoint::read_meta(work() / "epoch_2");
      FAIL() << "read";
    } catch (const host::HostError& e) {
      EXPECT_EQ(e.code(), RH_ERROR_DATA_LOSS);
    }
    std::vector<std::string> skipped;
    auto resumable = store_->find_resumable(&skipped);
    ASSERT_TRUE(resumable.has_value());
    EXPECT_EQ(*resumable, work() / "epoch_1");
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_THAT(skipped[0], HasSubstr("meta.json lists the file stem"));
  }
}

TEST_F(CheckpointStoreTest, MetaDigestIsFnv1a64OfMetaJson) {
  fs::create_directories(work() / "c");
  write_text(work() / "c" / "meta.json", "");
  EXPECT_EQ(store_->meta_digest(work() / "c"), "cbf29ce484222325");  // FNV-1a 64 of ""
  write_text(work() / "c" / "meta.json", "a");
  EXPECT_EQ(checkpoint::meta_digest(work() / "c"), "af63dc4c8601ec8c");  // of "a"

  save("epoch_1", 1, 10);
  const std::string first = store_->meta_digest(work() / "epoch_1");
  EXPECT_EQ(first.size(), 16u);
  EXPECT_EQ(store_->meta_digest(work() / "epoch_1"), first);
  save("epoch_1", 1, 11);  // same name, another checkpoint
  EXPECT_NE(store_->meta_digest(work() / "epoch_1"), first);

  fs::remove(work() / "epoch_1" / "meta.json");
  try {
    store_->meta_digest(work() / "epoch_1");
    FAIL() << "digested";
  } catch (const host::HostError& e) {
    EXPECT_EQ(e.code(), RH_ERROR_DATA_LOSS);
    EXPECT_EQ(std::string(e.what()), (work() / "epoch_1" / "meta.json").string() +
                                         " is missing (an incomplete checkpoint)");
  }
}

}  // namespace
}  // namespace rh::test
