// The lifecycle end to end, through the runner-host binary: golden event
// sequences (recorded by the trace hook), exact resume, val/test-only runs,
// auto_scale_lr with schedulers, and the errors users can hit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;
using ::testing::Not;

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
  std::string model = kModel;
  std::string train_data = kTrainData;
  std::string optim = kOptim;
  bool val = true;
  bool test = false;
  std::string train_cfg = "train_cfg: {by_epoch: true, max_epochs: 2, val_interval: 1}\n";
  std::string hooks;  // extra hook lines after the trace hook
  std::string extra;  // extra top-level keys

  std::string yaml() const {
    return std::string("seed: 1\n") + model + "data:\n" + train_data + (val ? kValData : "") +
           (test ? kTestData : "") + optim + train_cfg + "hooks:\n" + kTrace + hooks + extra;
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
      // Rewriting is for a developer who reviews the diff, never for CI,
      // where it would make every golden test pass whatever the sequence.
      ASSERT_EQ(std::getenv("CI"), nullptr) << "RH_UPDATE_GOLDEN is set under CI";
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

// ---- Optimizer setup order ------------------------------------------------------

// The metrics file: one JSON object per line; the "lr" of each train line.
std::vector<double> train_lrs(const fs::path& metrics) {
  std::vector<double> lrs;
  std::istringstream in(rh::test::read_file(metrics));
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"mode\": \"train\"") == std::string::npos) continue;
    auto at = line.find("\"lr\": ");
    if (at != std::string::npos) lrs.push_back(std::stod(line.substr(at + 6)));
  }
  return lrs;
}

TEST_F(LifecycleTest, AutoScaleLrScalesBeforeTheSchedulersTakeTheirBase) {
  // batch 8 / base_batch_size 4 on one rank: lr 0.1 -> 0.2; then a linear
  // warm-up from 0.5x over iterations 0..1: 0.1, 0.2, 0.2...
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 1}\n";
  job.hooks = "  - {type: metrics}\n";
  job.extra =
      "auto_scale_lr: {enable: true, base_batch_size: 4}\n"
      "param_scheduler: {type: LinearLR, start_factor: 0.5, by_epoch: false, begin: 0, end: 2}\n";
  auto r = run(job);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("auto_scale_lr: lr x 2"));
  std::vector<double> lrs = train_lrs(dir / "work/metrics.jsonl");
  ASSERT_EQ(lrs.size(), 3u);
  // DOUBLE_EQ (4 ulp): metrics.jsonl prints the shortest round trip (the
  // double itself), and each lr is the base times 2 and a factor: <= 2 ulp.
  EXPECT_DOUBLE_EQ(lrs[0], 0.1);
  EXPECT_DOUBLE_EQ(lrs[1], 0.2);
  EXPECT_DOUBLE_EQ(lrs[2], 0.2);
}

// `auto_scale_lr.enable`: off unless true (the lr stays the optimizer's,
// with base_batch_size written or not); on, it needs base_batch_size.
TEST_F(LifecycleTest, AutoScaleLrIsOffUnlessEnabledAndNeedsItsBaseBatchSize) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 1}\n";
  job.hooks = "  - {type: metrics}\n";
  job.extra = "auto_scale_lr: {enable: false, base_batch_size: 4}\n";
  auto off = run(job, "", "off");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  EXPECT_THAT(off.output, Not(HasSubstr("auto_scale_lr:")));
  EXPECT_EQ(train_lrs(dir / "off/metrics.jsonl"), (std::vector<double>{0.1, 0.1, 0.1}));
  job.extra = "auto_scale_lr: {enable: true}\n";
  auto no_base = run(job, "", "no_base");
  EXPECT_EQ(no_base.exit_code, 2) << no_base.output;
  EXPECT_THAT(no_base.output, HasSubstr("auto_scale_lr: enable: true needs base_batch_size"));
}

// ---- Val and test without training ------------------------------------------------

TEST_F(LifecycleTest, ValOnlyEvaluatesTheLoadedCheckpointExactly) {
  Job job;
  job.hooks = "  - {type: checkpoint, interval: 1}\n  - {type: metrics}\n";
  run_ok(job);
  // The last val line of training...
  std::string metrics = rh::test::read_file(dir / "work/metrics.jsonl");
  std::string last_val = metrics.substr(metrics.rfind("{\"mode\": \"val\""));
  last_val = last_val.substr(last_val.find("\"accuracy/top1\""));
  // ...equals a val-only run on the final checkpoint (no optimizer built).
  fs::remove(dir / "work/metrics.jsonl");
  auto r = run(job, "--mode val --set load_from=" + (dir / "work/epoch_2").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string val = rh::test::read_file(dir / "work/metrics.jsonl");
  EXPECT_EQ(val.substr(val.find("\"accuracy/top1\"")), last_val);
  EXPECT_THAT(r.output, HasSubstr("loaded weights from"));
}

// ---- Resume from a best checkpoint ---------------------------------------------

TEST_F(LifecycleTest, ResumesFromABestCheckpoint) {
  Job job;
  job.hooks = "  - {type: checkpoint, interval: 100, save_last: false, save_best: accuracy/top1}\n";
  run_ok(job);
  fs::path best;
  for (const auto& e : fs::directory_iterator(dir / "work"))
    if (e.path().filename().string().rfind("best_accuracy_top1_epoch_", 0) == 0) best = e.path();
  ASSERT_FALSE(best.empty()) << "no best checkpoint was saved";
  Job more = job;
  more.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 3, val_interval: 1}\n";
  more.extra = "resume: " + best.string() + "\n";
  auto r = run(more);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("resumed from " + best.string()));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("at epoch [12], iteration [36]"));
}

// ---- Errors users can hit -----------------------------------------------------

TEST_F(LifecycleTest, ResumingACheckpointOfADifferentModelListsTheMismatches) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 1}\n";
  job.hooks = "  - {type: checkpoint}\n";
  run_ok(job);
  Job wider = job;
  wider.extra = "resume: auto\n";
  auto r = run(wider, "--set 'model.hidden=[32]'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("does not match the model"));
  EXPECT_THAT(r.output, HasSubstr("layers.0.weight: checkpoint [16, 8] vs model [32, 8]"));
}

TEST_F(LifecycleTest, LoadFromReportsMissingAndUnexpectedKeys) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 1}\n";
  job.hooks = "  - {type: checkpoint}\n";
  run_ok(job);                                           // hidden [16]
  run_ok(job, "--set 'model.hidden=[16, 16]'", "deep");  // adds layers.1
  const std::string shallow_ckpt = (dir / "work/epoch_1").string();
  const std::string deep_ckpt = (dir / "deep/epoch_1/model.safetensors").string();

  // Strict (the default): a deeper model misses layers.1 in the checkpoint.
  auto strict = run(job, "--set 'model.hidden=[16, 16]' --set load_from=" + shallow_ckpt, "a");
  EXPECT_EQ(strict.exit_code, 1) << strict.output;
  EXPECT_THAT(strict.output,
              HasSubstr("missing in the checkpoint (2): layers.1.weight, layers.1.bias"));
  // Not strict: reported as a warning, the run goes on.
  auto loose = run(
      job,
      "--set 'model.hidden=[16, 16]' --set 'load_from={path: " + shallow_ckpt + ", strict: false}'",
      "b");
  EXPECT_EQ(loose.exit_code, 0) << loose.output;
  EXPECT_THAT(loose.output,
              HasSubstr("missing in the checkpoint (2): layers.1.weight, layers.1.bias"));
  // A plain weights file with more than the model has: unexpected keys.
  auto extra = run(job, "--set load_from=" + deep_ckpt, "c");
  EXPECT_EQ(extra.exit_code, 1) << extra.output;
  EXPECT_THAT(extra.output,
              HasSubstr("unexpected in the checkpoint (2): layers.1.bias, layers.1.weight"));
}

TEST_F(LifecycleTest, AFullDiskAtSaveFailsAndKeepsThePreviousCheckpoint) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 1}\n";
  job.hooks = "  - {type: checkpoint}\n";
  job.extra = "";
  const std::string wide = "--set 'model.hidden=[64]'";
  run_ok(job, wide);
  Job more = job;
  more.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 2}\n";
  more.extra = "resume: auto\n";
  // Files may grow to 2 KiB: the 3 KiB model file of epoch 2 cannot be written
  // (EFBIG, as on a full disk). The trace hook would hit the limit first: drop it.
  dir.write("job.yaml", "work_dir: " + (dir / "work").string() + "\n" + more.yaml());
  std::string yaml = rh::test::read_file(dir / "job.yaml");
  yaml.replace(yaml.find(kTrace), std::string(kTrace).size(), "");
  dir.write("job.yaml", yaml);
  auto r = rh::test::run_command("cd " + quote(dir.path().string()) +
                                 " && trap '' XFSZ && ulimit -f 2 && " + quote(RH_RUNNER_HOST) +
                                 " --config job.yaml " + wide);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("checkpoint 'epoch_2'.*File too large"));
  EXPECT_FALSE(fs::exists(dir / "work/epoch_2"));
  EXPECT_EQ(rh::test::read_file(dir / "work/latest"), "epoch_1\n");
  for (const auto& e : fs::directory_iterator(dir / "work"))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // The previous checkpoint still loads.
  auto val =
      run(job, "--mode val " + wide + " --set load_from=" + (dir / "work/epoch_1").string() +
                   " --set 'data.val={dataset: {type: synthetic_classification, num_samples: 8, "
                   "num_features: 8, num_classes: 3}, batch_size: 8}'");
  EXPECT_EQ(val.exit_code, 0) << val.output;
}

TEST_F(LifecycleTest, AMissingDataFileIsNamed) {
  Job job;
  job.val = false;
  auto r = run(job, "--set 'data.train.dataset={type: csv, path: data/train.csv}'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("data.train.dataset.path: cannot read the CSV file '" +
                                  (dir / "data/train.csv").string() + "'"));
}

TEST_F(LifecycleTest, UnknownTypesListTheChoices) {
  Job job;
  auto model = run(job, "--set model.type=resnet --dry-run");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_THAT(
      model.output,
      HasSubstr("unknown model type 'resnet'; choices: convnet, gpt, llama, mlp, torchscript, vit"));
  auto optim = run(job, "--set optim_wrapper.optimizer.type=Adamw --dry-run");
  EXPECT_EQ(optim.exit_code, 2);
  EXPECT_THAT(optim.output, HasSubstr("unknown optimizer type 'Adamw'; choices: Adam, AdamW, SGD"));
  auto sched = run(job, "--set 'param_scheduler={type: CosineLR}' --dry-run");
  EXPECT_EQ(sched.exit_code, 2);
  EXPECT_THAT(
      sched.output,
      HasSubstr("unknown param_scheduler type 'CosineLR'; choices: ConstantLR, CosineAnnealingLR"));
  auto data = run(job, "--set data.train.dataset.type=imagenet --dry-run");
  EXPECT_EQ(data.exit_code, 2);
  EXPECT_THAT(data.output, HasSubstr("unknown dataset type 'imagenet'; choices: CustomDataset, "
                                     "ImageNet, char_lm, cifar10, csv, megatron_indexed, mnist, "
                                     "synthetic_classification, token_bin (did you mean "
                                     "'ImageNet'?)"));
}

TEST_F(LifecycleTest, HookErrorPolicy) {
  Job stop;
  stop.val = false;
  stop.hooks = "  - {type: trace, path: " + (dir / "no/such/dir/t.log").string() + "}\n";
  auto r = run(stop);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("hook 'trace'"));
  EXPECT_THAT(r.output, HasSubstr("cannot open trace file"));
  EXPECT_THAT(r.output, HasSubstr("(at before_run)"));
  Job warn = stop;
  warn.hooks =
      "  - {type: trace, path: " + (dir / "no/such/dir/t.log").string() + ", on_error: warn}\n";
  auto w = run(warn);
  EXPECT_EQ(w.exit_code, 0) << w.output;
  EXPECT_THAT(w.output, HasSubstr("on_error: warn, the run goes on"));
}

// ---- Gradient accumulation, preemption, hook state ---------------------------

fs::path test_plugin(const std::string& name) {
  return fs::path(RH_TEST_PLUGIN_DIR) / ("librh_test_" + name + ".so");
}

// 80 samples in batches of 8: 10 iterations per epoch, so that max_iters (not
// the epoch) ends the last window.
const char* const kLongTrainData =
    "  train: {dataset: {type: synthetic_classification, num_samples: 80, num_features: 8, "
    "num_classes: 3},\n"
    "          batch_size: 8, shuffle: true, num_workers: 0}\n";

TEST_F(LifecycleTest, TheLastShorterWindowBeforeMaxItersIsDividedByItsLength) {
  // accumulative_counts 2, max_iters 5: windows {1,2} {3,4} {5}; the last one
  // must be divided by 1 (its real length), as a window of one batch is.
  Job whole;
  whole.val = false;
  whole.train_data = kLongTrainData;
  whole.optim =
      "optim_wrapper: {optimizer: {type: SGD, lr: 0.1, momentum: 0.9}, accumulative_counts: 2}\n";
  whole.train_cfg = "train_cfg: {by_epoch: false, max_iters: 5}\n";
  whole.hooks = "  - {type: checkpoint, by_epoch: false, interval: 1}\n";
  run_ok(whole, "", "whole");
  // The same first two windows, then iteration 5 alone with accumulative_counts 1.
  Job first = whole;
  first.train_cfg = "train_cfg: {by_epoch: false, max_iters: 4}\n";
  run_ok(first, "", "split");
  Job last = whole;
  last.optim = kOptim;
  last.extra = "resume: auto\n";
  run_ok(last, "", "split");
  EXPECT_EQ(file_bytes(dir / "whole/iter_5/model.safetensors"),
            file_bytes(dir / "split/iter_5/model.safetensors"));
  EXPECT_NE(file_bytes(dir / "whole/iter_4/model.safetensors"),
            file_bytes(dir / "whole/iter_5/model.safetensors"));
}

// A job with dropout (the generator's state matters), accumulation windows of
// 2 and a checkpoint every 3 iterations: iteration 3 is inside a window.
Job accumulating_job() {
  Job job;
  job.val = false;
  job.model = "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3, dropout: 0.3}\n";
  job.train_data = kLongTrainData;
  job.optim =
      "optim_wrapper: {optimizer: {type: SGD, lr: 0.1, momentum: 0.9}, accumulative_counts: 2}\n";
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 8}\n";
  job.hooks = "  - {type: checkpoint, by_epoch: false, interval: 3}\n";
  return job;
}

TEST_F(LifecycleTest, ACheckpointInsideAnAccumulationWindowIsSavedAtItsEnd) {
  run_ok(accumulating_job());
  // iter_3 was asked for after iteration 3, inside the window {3, 4}: it
  // holds the state after iteration 4, where no accumulated gradient exists.
  EXPECT_THAT(file_bytes(dir / "work/iter_3/meta.json"), HasSubstr("\"iter\": 4,"));
  EXPECT_THAT(file_bytes(dir / "work/iter_6/meta.json"), HasSubstr("\"iter\": 6,"));
}

TEST_F(LifecycleTest, SigtermStopsAtTheNextWindowEndWithACheckpointAndResumesExactly) {
  run_ok(accumulating_job(), "", "straight");
  // SIGTERM after iteration 3 (rh_RunState.iter 2), inside the window {3, 4}.
  Job stopped = accumulating_job();
  stopped.hooks += "  - {type: raise_signal, plugin: " + test_plugin("raise_signal").string() +
                   ", signal: 15, iter: 2}\n";
  auto r = run(stopped, "", "resumed");
  EXPECT_EQ(r.exit_code, 128 + 15) << r.output;
  EXPECT_THAT(r.output, HasSubstr("stopped by signal 15 after iteration 4"));
  EXPECT_THAT(file_bytes(dir / "resumed/iter_3/meta.json"), HasSubstr("\"iter\": 4,"));
  EXPECT_FALSE(fs::exists(dir / "resumed/iter_6"));
  Job rest = accumulating_job();
  rest.extra = "resume: auto\n";
  run_ok(rest, "", "resumed");
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(file_bytes(dir / "straight/iter_8" / file), file_bytes(dir / "resumed/iter_8" / file))
        << file;
}

TEST_F(LifecycleTest, Sigusr1AtAWindowEndSavesACheckpointNamedByItsIteration) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 8}\n";
  job.hooks =
      "  - {type: checkpoint, by_epoch: false, interval: 100}\n"
      "  - {type: raise_signal, plugin: " +
      test_plugin("raise_signal").string() + ", signal: 10, iter: 4}\n";
  auto r = run(job);
  // Seen in the next iteration's agreement: iteration 6 is the boundary.
  EXPECT_EQ(r.exit_code, 128 + 10) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("stopped by signal 10 after iteration 6 (checkpoint iter_6 saved)"));
  EXPECT_EQ(rh::test::read_file(dir / "work/latest"), "iter_6\n");
  // Without a checkpoint hook it stops all the same, saving nothing.
  Job bare = job;
  bare.hooks = "  - {type: raise_signal, plugin: " + test_plugin("raise_signal").string() +
               ", signal: 15, iter: 1}\n";
  auto b = run(bare, "", "bare");
  EXPECT_EQ(b.exit_code, 128 + 15) << b.output;
  EXPECT_THAT(b.output, HasSubstr("(the job has no checkpoint hook)"));
  EXPECT_FALSE(fs::exists(dir / "bare/latest"));
}

TEST_F(LifecycleTest, AddingAHookBeforeResumingKeepsTheCheckpointHooksState) {
  Job part;
  part.val = false;
  part.train_cfg = "train_cfg: {by_epoch: false, max_iters: 3}\n";
  part.hooks = "  - {type: checkpoint, by_epoch: false, interval: 1, max_keep_ckpts: 2}\n";
  run_ok(part);
  ASSERT_TRUE(fs::exists(dir / "work/iter_2"));
  // Resumed with one more hook that runs before the checkpoint hook: the
  // checkpoint hook still gets back its list of kept checkpoints, so the
  // ones saved before the resume are removed in turn.
  Job rest = part;
  rest.train_cfg = "train_cfg: {by_epoch: false, max_iters: 6}\n";
  rest.hooks = "  - {type: metrics, priority: 0}\n" + part.hooks;
  rest.extra = "resume: auto\n";
  run_ok(rest);
  EXPECT_FALSE(fs::exists(dir / "work/iter_2"));
  EXPECT_FALSE(fs::exists(dir / "work/iter_3"));
  EXPECT_TRUE(fs::exists(dir / "work/iter_5"));
  EXPECT_TRUE(fs::exists(dir / "work/iter_6"));
}

// ---- Frozen parameters -------------------------------------------------------------

TEST_F(LifecycleTest, FrozenParametersKeepTheirInitialValuesAndHaveNoOptimizerState) {
  Job job;
  job.val = false;
  job.model =
      "model: {type: mlp, in_features: 8, hidden: [16, 16], num_classes: 3, frozen: "
      "[layers.0]}\n";
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 6}\n";
  job.hooks = "  - {type: checkpoint, by_epoch: false, interval: 1}\n";
  run_ok(job, "", "frozen");
  Job free = job;
  free.model = "model: {type: mlp, in_features: 8, hidden: [16, 16], num_classes: 3}\n";
  run_ok(free, "", "free");
  auto first = rh::test::read_safetensors(dir / "frozen/iter_1/model.safetensors");
  auto last = rh::test::read_safetensors(dir / "frozen/iter_6/model.safetensors");
  auto moved = rh::test::read_safetensors(dir / "free/iter_1/model.safetensors");
  for (const char* name : {"layers.0.weight", "layers.0.bias"}) {
    ASSERT_TRUE(last.count(name)) << name;
    EXPECT_EQ(last.at(name), first.at(name)) << name << " changed while frozen";
    EXPECT_NE(moved.at(name), first.at(name)) << name << " does not move even when trained";
  }
  EXPECT_NE(last.at("layers.1.weight"), first.at("layers.1.weight"));
  const std::string optim = file_bytes(dir / "frozen/iter_6/optimizer.safetensors");
  EXPECT_EQ(optim.find("layers.0."), std::string::npos);
  EXPECT_NE(optim.find("layers.1.weight.momentum_buffer"), std::string::npos);
}

TEST_F(LifecycleTest, AFrozenPrefixThatMatchesNothingIsNamed) {
  Job job;
  job.val = false;
  job.model =
      "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3, frozen: [layers.0, "
      "blocks.0]}\n";
  auto r = run(job);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("model.frozen.1: 'blocks.0' matches no parameter of the model"));
  EXPECT_THAT(r.output, HasSubstr("its top-level modules: layers, head"));
  Job all = job;
  all.model =
      "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3, frozen: [layers, "
      "head]}\n";
  auto a = run(all);
  EXPECT_NE(a.exit_code, 0) << a.output;
  EXPECT_THAT(a.output, HasSubstr("the model has no trainable parameter"));
}

// ---- Strategies' own optimizer tensors and traits --------------------------------

std::string own_optimizer(const std::string& extra = "") {
  return "strategy: {type: own_optimizer, plugin: " + test_plugin("own_optimizer").string() +
         extra + "}\n";
}

// A strategy that hands the host its own optimizer tensors (OptimizerParams)
// with gradients in its own memory trains exactly like `single`.
TEST_F(LifecycleTest, OptimizerParamsOfTheStrategyAreWhatTheOptimizerSteps) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 5}\n";
  job.hooks = "  - {type: checkpoint, by_epoch: false, interval: 5}\n";
  run_ok(job, "", "single");
  Job own = job;
  own.extra = own_optimizer();
  auto r = run(own, "", "own");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("optimizer over 4 tensor(s) given by strategy 'own_optimizer'"));
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(file_bytes(dir / "single/iter_5" / file), file_bytes(dir / "own/iter_5" / file))
        << file;
  // clip_grad would need the norm over every rank's tensors: refused.
  Job clipped = own;
  clipped.optim = "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}, clip_grad: {max_norm: 1.0}}\n";
  auto c = run(clipped, "", "clipped");
  EXPECT_EQ(c.exit_code, 2) << c.output;
  EXPECT_THAT(c.output, HasSubstr("optim_wrapper.clip_grad: strategy 'own_optimizer'"));
  EXPECT_THAT(c.output, HasSubstr("has no ReduceGradNorm (ABI 1.3)"));
}

// paramwise_cfg applies to a strategy's own tensors (their requires_grad is
// false) by their parameter: custom_keys lr_mult 0 freezes them as under
// `single`. A strategy that names its tensors after no parameter of the
// model cannot have paramwise_cfg applied: refused, naming the tensor.
TEST_F(LifecycleTest, ParamwiseCfgAppliesToAStrategysOwnTensorsByTheirParameter) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 2}\n";
  job.hooks = "  - {type: checkpoint, by_epoch: false, interval: 1}\n";
  job.optim =
      "optim_wrapper:\n  optimizer: {type: AdamW, lr: 0.01, weight_decay: 0.1}\n"
      "  paramwise_cfg: {custom_keys: {weight: {lr_mult: 0, decay_mult: 0}, bias: {lr_mult: 0, "
      "decay_mult: 0}}}\n";
  for (const std::string& strategy : {std::string("single"), std::string("own")}) {
    SCOPED_TRACE(strategy);
    Job j = job;
    if (strategy == "own") j.extra = own_optimizer();
    auto r = run(j, "", strategy);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(file_bytes(dir / strategy / "iter_1/model.safetensors"),
              file_bytes(dir / strategy / "iter_2/model.safetensors"))
        << "a parameter with lr_mult 0 and decay_mult 0 moved";
  }
  Job renamed = job;
  renamed.extra = own_optimizer(", name_prefix: flat.");
  auto bad = run(renamed, "", "renamed");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("optim_wrapper.paramwise_cfg: paramwise_cfg cannot apply: "
                                    "strategy 'own_optimizer'"));
  EXPECT_THAT(bad.output, HasSubstr("names an optimizer tensor 'flat.layers.0.weight' that is no "
                                    "parameter of the model"));
}

// MMPretrain's ViT recipe with LearningRateDecayOptimWrapperConstructor:
// --print-param-groups shows every trainable parameter's lr and weight
// decay, each checked here against MMPretrain's rule computed from the name
// (layer id: embeddings 0, blocks.i i + 1, the rest L + 1; lr x
// rate^(L + 1 - id); decay: custom key, then norm, bias, 1-D). A model
// without numbered blocks (the convnet) is refused.
TEST_F(LifecycleTest, PrintParamGroupsShowsMmpretrainsLayerDecayOnVit) {
  const std::string optim =
      "optim_wrapper:\n"
      "  optimizer: {type: AdamW, lr: 0.004, weight_decay: 0.05}\n"
      "  constructor: LearningRateDecayOptimWrapperConstructor\n"
      "  paramwise_cfg:\n"
      "    layer_decay_rate: 0.75\n"
      "    norm_decay_mult: 0.0\n"
      "    bias_decay_mult: 0.0\n"
      "    flat_decay_mult: 0.0\n"
      "    custom_keys: {.pos_embed: {decay_mult: 0.0}, .cls_token: {decay_mult: 0.0}}\n";
  Job job;
  job.model =
      "model: {type: vit, image_size: 16, patch_size: 8, in_channels: 3, num_classes: 3, dim: 16, "
      "depth: 3, heads: 2}\n";
  job.optim = optim;
  auto r = run(job, "--print-param-groups");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream cells(line);
    std::string name, shape, lr, wd, layer;
    if (!std::getline(cells, name, '\t') || !std::getline(cells, shape, '\t') ||
        !std::getline(cells, lr, '\t') || !std::getline(cells, wd, '\t') ||
        !std::getline(cells, layer) || name == "parameter")
      continue;
    int id = 4;  // L + 1 with L = 3
    if (name.rfind("embed.", 0) == 0) id = 0;
    if (name.rfind("blocks.", 0) == 0) id = 1 + std::stoi(name.substr(7));
    EXPECT_EQ(layer, std::to_string(id)) << name;
    // Printed with 10 significant digits ({:.10g}): an lr in [1e-3, 1e-2)
    // is within 5e-13 of its value (this holds while every lr stays < 0.01).
    EXPECT_NEAR(std::stod(lr), 0.004 * std::pow(0.75, 4 - id), 1e-12) << name;
    const bool custom = name.find(".pos_embed") != std::string::npos ||
                        name.find(".cls_token") != std::string::npos;
    const bool norm = name.find(".norm") != std::string::npos;
    const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    const bool flat = shape.find(',') == std::string::npos;  // "[16]"
    EXPECT_EQ(std::stod(wd), custom || norm || bias || flat ? 0.0 : 0.05) << name;
    ++rows;
  }
  EXPECT_EQ(rows, 4 + 3 * 12 + 4) << r.output;  // embed, 3 blocks of 12, head
  Job convnet;                                  // stem, stages: no blocks.<i> / layers.<i>
  convnet.model =
      "model: {type: convnet, in_channels: 3, num_classes: 3, width: 4, blocks: [1, 1]}\n";
  convnet.optim = optim;
  auto refused = run(convnet, "--print-param-groups");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("optim_wrapper.constructor: "
                                        "LearningRateDecayOptimWrapperConstructor: parameter"));
  EXPECT_THAT(refused.output, HasSubstr("the model has no numbered blocks"));
}

// Traits the host cannot honour yet are refused before anything runs.
TEST_F(LifecycleTest, TraitsTheHostCannotHonourAreRefused) {
  Job job;
  job.val = false;
  job.extra = own_optimizer(", load_phase: after_wrap");
  auto a = run(job, "--dry-run");
  EXPECT_EQ(a.exit_code, 2) << a.output;
  EXPECT_THAT(a.output, HasSubstr("declares load_phase after_wrap"));
  EXPECT_THAT(a.output, HasSubstr("librh_test_own_optimizer.so"));
  job.extra = own_optimizer(", sharded_checkpoint: true");
  auto s = run(job, "--dry-run");
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_THAT(s.output, HasSubstr("declares sharded_checkpoint"));
  // own_optimizer has OptimizerParams: only the missing entry is named.
  EXPECT_THAT(s.output, HasSubstr("without the entry UnitParams (ABI 1.3)"));
  EXPECT_THAT(s.output, Not(HasSubstr("without the entries")));
  EXPECT_FALSE(fs::exists(dir / "work"));
}

// ---- What the hooks cost per iteration ----------------------------------------

// The `hooks:` line after the train loop's: the time each hook's handlers
// took during the loop, per iteration, named by type (`#n` for the n-th
// repeat), summed in front.
TEST_F(LifecycleTest, TheTrainLoopLineIsFollowedByTheTimeEachHookTook) {
  Job job;
  job.val = false;
  const std::string slow = "  - {type: slow_hook, plugin: " + test_plugin("raise_signal").string();
  job.hooks = slow + ", sleep_us: 3000}\n" + slow + "}\n";
  auto r = run(job);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch line;
  const std::regex hooks_line("hooks: ([0-9.]+) us/iteration during the train loop \\(([^)]*)\\)");
  ASSERT_TRUE(std::regex_search(r.output, line, hooks_line)) << r.output;
  std::map<std::string, double> each;
  const std::string split = line[2];
  const std::regex item("([a-z_]+(#[0-9]+)?) ([0-9.]+)");
  for (auto it = std::sregex_iterator(split.begin(), split.end(), item);
       it != std::sregex_iterator(); ++it)
    each[(*it)[1]] = std::stod((*it)[3]);
  ASSERT_EQ(each.size(), 3u) << split;
  ASSERT_TRUE(each.count("trace") && each.count("slow_hook") && each.count("slow_hook#1")) << split;
  EXPECT_GE(each["slow_hook"], 3000.0) << split;  // it sleeps 3 ms in each after_train_iter
  EXPECT_GT(each["trace"], 0.0) << split;         // it writes every event
  // Each of the 4 numbers is printed to 2 decimals ({:.2f}): 4 x 0.005 =
  // 0.02 at most between the total and the sum of its printed parts.
  EXPECT_NEAR(std::stod(line[1]), each["trace"] + each["slow_hook"] + each["slow_hook#1"], 0.03)
      << r.output;
  // No hooks: no line.
  auto none = run(job, "--set 'hooks=[]'");
  ASSERT_EQ(none.exit_code, 0) << none.output;
  EXPECT_THAT(none.output, HasSubstr("train loop:"));
  EXPECT_THAT(none.output, Not(HasSubstr("hooks:")));
}

// ---- Job keys shown by their effect (docs/config-keys.md) ---------------------------

// `seed`: the initial weights and the shuffled order come from it: the same
// seed gives the same bytes after an iteration, another seed other bytes;
// the log names the seed in use.
TEST_F(LifecycleTest, TheSeedSetsTheInitialWeightsAndTheOrder) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 1}\n";
  job.hooks = "  - {type: checkpoint, by_epoch: false, interval: 1}\n";
  run_ok(job, "", "one");
  run_ok(job, "", "again");
  auto two = run(job, "--set seed=2", "two");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_THAT(two.output, HasSubstr(", seed 2, rank 0 of 1"));
  EXPECT_EQ(file_bytes(dir / "one/iter_1/model.safetensors"),
            file_bytes(dir / "again/iter_1/model.safetensors"));
  EXPECT_NE(file_bytes(dir / "one/iter_1/model.safetensors"),
            file_bytes(dir / "two/iter_1/model.safetensors"));
}

// `diff_rank_seed`: each rank's seed is the job's plus its rank (MMEngine's
// rule), so dropout draws differently on each rank; without it every rank
// draws the same masks. 2-rank ddp, one iteration with dropout 0.5.
TEST_F(LifecycleTest, DiffRankSeedOffsetsEachRanksSeedByItsRank) {
  auto launch = [&](const std::string& name, const std::string& extra) {
    dir.write(name + ".yaml",
              "work_dir: " + (dir / name).string() +
                  "\n"
                  "seed: 3\n"
                  "model: {type: mlp, in_features: 8, hidden: [16], num_classes: 3, dropout: 0.5}\n"
                  "data:\n" +
                  kTrainData +
                  "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n"
                  "train_cfg: {by_epoch: false, max_iters: 1}\n"
                  "strategy: {type: ddp}\n"
                  "hooks: [{type: checkpoint, by_epoch: false, interval: 1}]\n"
                  "dist: {timeout_s: 30}\n" +
                  extra);
    return rh::test::run_command(
        "cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH RH_LOG_ALL_RANKS=1 " +
        quote(RH_RUNNER_HOST) + " --config " + name + ".yaml --nproc-per-node 2");
  };
  auto same = launch("same", "");
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_THAT(same.output, HasSubstr(", seed 3, rank 1 of 2")) << same.output;
  auto again = launch("again", "diff_rank_seed: false\n");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  auto offset = launch("offset", "diff_rank_seed: true\n");
  ASSERT_EQ(offset.exit_code, 0) << offset.output;
  EXPECT_THAT(offset.output, HasSubstr(", seed 3, rank 0 of 2"));
  EXPECT_THAT(offset.output, HasSubstr(", seed 4, rank 1 of 2"));
  EXPECT_EQ(file_bytes(dir / "same/iter_1/model.safetensors"),
            file_bytes(dir / "again/iter_1/model.safetensors"));
  EXPECT_NE(file_bytes(dir / "same/iter_1/model.safetensors"),
            file_bytes(dir / "offset/iter_1/model.safetensors"))
      << "rank 1's dropout masks did not change with its seed";
}

// `deterministic: true` is torch.use_deterministic_algorithms(True): an op
// without a deterministic kernel raises. The probe model's forward calls
// Tensor.put_ (accumulate=False), such an op even on the CPU
// (tests/fixtures/model/make_deterministic_probe_scripted.cpp): it trains
// without the key and with `false`, and stops with PyTorch's message with
// `true`.
TEST_F(LifecycleTest, DeterministicMakesAnOpWithoutADeterministicKernelAnError) {
  const fs::path probe = (fs::path(RH_LIFECYCLE_GOLDEN_DIR) /
                          "../../../fixtures/model/deterministic_probe_scripted.pt")
                             .lexically_normal();
  ASSERT_TRUE(fs::exists(probe)) << probe;
  Job job;
  job.val = false;
  job.model = "model: {type: torchscript, path: " + probe.string() + ", num_classes: 3}\n";
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 2}\n";
  run_ok(job, "", "default");
  run_ok(job, "--set deterministic=false", "off");
  auto on = run(job, "--set deterministic=true", "on");
  EXPECT_EQ(on.exit_code, 1) << on.output;
  EXPECT_THAT(on.output, HasSubstr("put_ does not have a deterministic implementation"));
}

// `log_level`: the job's level (default info) decides what is logged, from
// plugins too; --log-level wins over it.
TEST_F(LifecycleTest, TheJobsLogLevelSetsWhatIsLoggedAndTheFlagWins) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 1}\n";
  // helper_hook logs "helper_hook: threshold=..." at debug after the run.
  job.hooks = "  - {type: helper_hook, plugin: " + test_plugin("helper_hook").string() + "}\n";
  const std::string info = "[info] strategy single on ";
  const std::string debug = "[debug] [hook helper_hook] helper_hook: threshold=1.000000";
  auto plain = run(job, "", "plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, HasSubstr(info));
  EXPECT_THAT(plain.output, Not(HasSubstr("[debug]")));
  job.extra = "log_level: debug\n";
  auto verbose = run(job, "", "debug");
  ASSERT_EQ(verbose.exit_code, 0) << verbose.output;
  EXPECT_THAT(verbose.output, HasSubstr(info));
  EXPECT_THAT(verbose.output, HasSubstr(debug));
  auto flag = run(job, "--log-level warn", "flag");
  ASSERT_EQ(flag.exit_code, 0) << flag.output;
  EXPECT_THAT(flag.output, Not(HasSubstr("[info]")));
  EXPECT_THAT(flag.output, Not(HasSubstr("[debug]")));
  job.extra = "log_level: warn\n";
  auto quiet = run(job, "", "warn");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_THAT(quiet.output, Not(HasSubstr("[info]")));
  EXPECT_THAT(quiet.output, Not(HasSubstr("[debug]")));
}

// `hooks[].priority`: handlers run in ascending priority (a number or
// MMEngine's level names; without the key, the plugin's own, 30 for
// helper_hook), equal priorities in job-file order. Each helper_hook logs
// its threshold at after_run: the order of those lines is the dispatch order.
TEST_F(LifecycleTest, HooksRunInAscendingPriorityAndEqualOnesInJobOrder) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 1}\n";
  job.extra = "log_level: debug\n";
  const std::string helper =
      "  - {type: helper_hook, plugin: " + test_plugin("helper_hook").string();
  job.hooks = helper + ", threshold: 1, priority: VERY_LOW}\n" +  // 90
              helper + ", threshold: 2, priority: 10}\n" +        //
              helper + ", threshold: 3}\n" +                      // the plugin's 30
              helper + ", threshold: 4, priority: HIGH}\n";       // 30, after it in the file
  auto r = run(job);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<size_t> at;
  for (const char* t : {"threshold=2.0", "threshold=3.0", "threshold=4.0", "threshold=1.0"}) {
    at.push_back(r.output.find(t));
    ASSERT_NE(at.back(), std::string::npos) << t << "\n" << r.output;
  }
  EXPECT_TRUE(std::is_sorted(at.begin(), at.end())) << r.output;
}

// `checkpoint_io.plugin`: the checkpoint IO is the one that library
// provides (helper_io, whose Save refuses): the save fails naming it, and
// nothing is published.
TEST_F(LifecycleTest, TheCheckpointIoOfItsPluginPathIsTheOneThatSaves) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 1}\n";
  job.hooks = "  - {type: checkpoint, by_epoch: false, interval: 1}\n";
  const fs::path library = test_plugin("helper_hook");
  job.extra = "checkpoint_io: {type: helper_io, plugin: " + library.string() + "}\n";
  auto r = run(job);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("checkpoint_io 'helper_io' (rh_test_helper_hook, " +
                                  library.string() + ")"));
  EXPECT_THAT(r.output, HasSubstr("helper_io cannot save 'model' (test plugin)"));
  EXPECT_FALSE(fs::exists(dir / "work/iter_1"));
}

// The epochs (or iterations) a train-mode run validates after, from the
// metrics hook's val lines.
std::vector<int> val_points(const fs::path& metrics, const std::string& counter) {
  std::vector<int> points;
  std::istringstream in(rh::test::read_file(metrics));
  const std::regex value("\"" + counter + "\": ([0-9]+)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.find("\"mode\": \"val\"") != std::string::npos && std::regex_search(line, m, value))
      points.push_back(std::stoi(m[1]));
  }
  return points;
}

// `train_cfg.val_interval` and `train_cfg.val_begin`: MMEngine's rule,
// validate from val_begin on, every val_interval, and at the end; by epoch
// and by iteration.
TEST_F(LifecycleTest, ValidationFollowsValBeginAndValInterval) {
  Job job;
  job.hooks = "  - {type: metrics}\n";
  job.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 5, val_interval: 2}\n";
  run_ok(job, "", "every2");
  EXPECT_EQ(val_points(dir / "every2/metrics.jsonl", "epoch"), (std::vector<int>{2, 4, 5}));
  job.train_cfg = "train_cfg: {by_epoch: true, max_epochs: 5, val_interval: 2, val_begin: 3}\n";
  run_ok(job, "", "from3");
  EXPECT_EQ(val_points(dir / "from3/metrics.jsonl", "epoch"), (std::vector<int>{4, 5}));
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 7, val_interval: 3, val_begin: 4}\n";
  run_ok(job, "", "iters");
  EXPECT_EQ(val_points(dir / "iters/metrics.jsonl", "iter"), (std::vector<int>{6, 7}));
}

// `dist.backend`: the communicator's backend (gloo for CPU tensors, nccl
// for CUDA ones). ddp in one process (a world of one) still builds one: the
// log names gloo; nccl runs where it can (a GPU and NCCL), else it is
// refused naming the backend, never silently replaced by gloo.
TEST_F(LifecycleTest, DistBackendChoosesTheCommunicator) {
  Job job;
  job.val = false;
  job.train_cfg = "train_cfg: {by_epoch: false, max_iters: 1}\n";
  auto alone = [&](const std::string& backend, const std::string& work) {
    // gloo on the CPU; nccl on the device ddp picks (a GPU where there is one).
    job.extra =
        backend == "gloo" ? "strategy: {type: ddp, device: cpu}\n" : "strategy: {type: ddp}\n";
    dir.write("job.yaml", "work_dir: " + (dir / work).string() + "\n" + job.yaml());
    return rh::test::run_command(
        "cd " + quote(dir.path().string()) +
        " && env -u RH_PLUGIN_PATH -u RANK -u WORLD_SIZE -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK " +
        quote(RH_RUNNER_HOST) + " --config job.yaml --set dist.backend=" + backend);
  };
  auto gloo = alone("gloo", "gloo");
  ASSERT_EQ(gloo.exit_code, 0) << gloo.output;
  EXPECT_THAT(gloo.output, HasSubstr("rank 0 of 1 (gloo backend, all_reduce through"));
  auto nccl = alone("nccl", "nccl");
  EXPECT_THAT(nccl.output, Not(HasSubstr("gloo backend"))) << nccl.output;
  if (nccl.exit_code == 0) {
    EXPECT_THAT(nccl.output, HasSubstr("rank 0 of 1 (nccl backend, all_reduce through"));
  } else {
    EXPECT_EQ(nccl.exit_code, 1) << nccl.output;
    EXPECT_THAT(nccl.output, HasSubstr("backend 'nccl'")) << nccl.output;
  }
}

}  // namespace
