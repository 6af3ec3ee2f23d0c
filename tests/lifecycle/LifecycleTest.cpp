// The lifecycle end to end, through the runner-host binary: golden event
// sequences (recorded by the trace hook), exact resume, val/test-only runs,
// auto_scale_lr with schedulers, and the errors users can hit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;

namespace {

const char* const kModel = "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3}\n";
// 24 training samples in batches of 8: 3 iterations per epoch.
const char* const kTrainData =
    "  train: {dataset: {type: synthetic_classification, num_samples: 24, num_features: 8, "
    "num_classes: 3},\n"
    "          batch_size: 8, shuffle: true, num_workers: 0}\n";
// 16 validation samples: 2 iterations.
const char* const kValData =
    "  val: {dataset: {type: synthetic_classification, num_samples: 16, num_features: 8, "
    "num_classes: 3,\n"
    "        split: val}, batch_size: 8, num_workers: 0}\n";
const char* const kTestData =
    "  test: {dataset: {type: synthetic_classification, num_samples: 8, num_features: 8, "
    "num_classes: 3,\n"
    "         split: test}, batch_size: 8, num_workers: 0}\n";
const char* const kOptim = "optim_wrapper: {optimizer: {type: SGD, lr: 0.1, momentum: 0.9}}\n";
const char* const kTrace = "  - {type: trace, path: trace.log, append: true}\n";

struct Job {
  bool val = true;
  bool test = false;
  std::string train_cfg = "train_cfg: {by_epoch: true, max_epochs: 2, val_interval: 1}\n";
  std::string hooks;  // extra hook lines after the trace hook
  std::string extra;  // extra top-level keys

  std::string yaml() const {
    return std::string("seed: 1\n") + kModel + "data:\n" + kTrainData + (val ? kValData : "") +
           (test ? kTestData : "") + kOptim + train_cfg + "hooks:\n" + kTrace + hooks + extra;
  }
};

class LifecycleTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult run(const Job& job, const std::string& args = "",
                              const std::string& work = "work") {
    dir.write("job.yaml", "work_dir: " + (dir / work).string() + "\n" + job.yaml());
    return rh::test::run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " +
                                 quote(RH_RUNNER_HOST) + " --config job.yaml " + args);
  }
  void run_ok(const Job& job, const std::string& args = "", const std::string& work = "work") {
    auto r = run(job, args, work);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // The trace with metric values dropped (names kept) and the temp dir
  // replaced: the sequence of events and counters, independent of
  // floating-point results and paths.
  std::string trace(const std::string& work = "work") const {
    static const std::set<std::string> kKept = {"mode",       "epoch",       "iter",
                                                "inner_iter", "events_seen", "dir"};
    std::istringstream in(rh::test::read_file(dir / work / "trace.log"));
    std::string out;
    for (std::string line; std::getline(in, line);) {
      std::istringstream words(line);
      std::string word, kept;
      while (words >> word) {
        auto eq = word.find('=');
        if (eq != std::string::npos && kKept.count(word.substr(0, eq)) == 0)
          word = word.substr(0, eq);
        auto tmp = word.find(dir.path().string());
        if (tmp != std::string::npos) word.replace(tmp, dir.path().string().size(), "<tmp>");
        kept += (kept.empty() ? "" : " ") + word;
      }
      out += kept + "\n";
    }
    return out;
  }
  // Goldens are reviewed text files; RH_UPDATE_GOLDEN=1 rewrites them.
  void expect_golden(const std::string& name, const std::string& work = "work") {
    const fs::path file = fs::path(RH_LIFECYCLE_GOLDEN_DIR) / (name + ".txt");
    std::string actual = trace(work);
    if (std::getenv("RH_UPDATE_GOLDEN") != nullptr) {
      std::ofstream(file) << actual;
      return;
    }
    EXPECT_EQ(actual, rh::test::read_file(file))
        << "golden " << file << " differs (RH_UPDATE_GOLDEN=1 rewrites it)";
  }
  std::string file_bytes(const fs::path& p) const {
    EXPECT_TRUE(fs::exists(p)) << p;
    return rh::test::read_file(p);
  }
};

// ---- Golden event sequences -------------------------------------------------

TEST_F(LifecycleTest, GoldenTrain) {
  Job job;
  job.val = false;
  run_ok(job);
  expect_golden("train");
}

TEST_F(LifecycleTest, GoldenTrainWithVal) {
  run_ok(Job{});
  expect_golden("train_with_val");
}

TEST_F(LifecycleTest, GoldenValOnly) {
  run_ok(Job{}, "--mode val");
  expect_golden("val_only");
}

TEST_F(LifecycleTest, GoldenTestOnly) {
  Job job;
  job.test = true;
  run_ok(job, "--mode test");
  expect_golden("test_only");
}

TEST_F(LifecycleTest, GoldenResume) {
  Job first;
  first.val = false;
  first.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 1}\n";
  first.hooks = "  - {type: checkpoint, interval: 1}\n";
  run_ok(first);
  fs::remove(dir / "work" / "trace.log");
  Job resumed = first;
  resumed.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 2}\n";
  resumed.extra = "resume: auto\n";
  run_ok(resumed);
  expect_golden("resume");
}

// ---- Exact resume -----------------------------------------------------------

// N iterations straight vs M, stop, resume, N-M more: the checkpoints at N
// hold bitwise-equal model and optimizer tensors (their files are equal).
TEST_F(LifecycleTest, ExactResumeMidEpoch) {
  // 3 iterations per epoch; iteration-based: stop at 4 (mid epoch 2), end at 7.
  Job straight;
  straight.train_cfg = "train_cfg: {by_epoch: false, max_iters: 7, val_interval: 100}\n";
  straight.hooks = "  - {type: checkpoint, by_epoch: false, interval: 1}\n";
  run_ok(straight, "", "straight");
  Job part = straight;
  part.train_cfg = "train_cfg: {by_epoch: false, max_iters: 4, val_interval: 100}\n";
  run_ok(part, "", "resumed");
  Job rest = straight;
  rest.extra = "resume: auto\n";
  run_ok(rest, "", "resumed");
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    EXPECT_EQ(file_bytes(dir / "straight/iter_7" / file), file_bytes(dir / "resumed/iter_7" / file))
        << file;
  }
  EXPECT_NE(file_bytes(dir / "straight/iter_6/model.safetensors"),
            file_bytes(dir / "straight/iter_7/model.safetensors"));
}

TEST_F(LifecycleTest, ExactResumeAcrossAnEpochBoundary) {
  // Stop exactly at the end of epoch 1 (iteration 3), continue to 2 epochs.
  Job straight;
  straight.val = false;
  straight.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 2}\n";
  straight.hooks = "  - {type: checkpoint, interval: 1}\n";
  run_ok(straight, "", "straight");
  Job part = straight;
  part.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 1}\n";
  run_ok(part, "", "resumed");
  Job rest = straight;
  rest.extra = "resume: auto\n";
  run_ok(rest, "", "resumed");
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(file_bytes(dir / "straight/epoch_2" / file),
              file_bytes(dir / "resumed/epoch_2" / file))
        << file;
}

}  // namespace
