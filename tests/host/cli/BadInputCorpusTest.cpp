// The bad-input corpus (issue 13): every input a user can get wrong, run
// through the runner-host binary as a user runs it. Each case asserts the
// exit code (README "Exit codes": 2 for an invalid job, plugin, data or model
// file, reported before anything runs; 1 for a run that fails), the message
// with its location (file:line:column, key path, plugin path, rank), and that
// nothing on disk changed: every file and folder of the test directory —
// including a work_dir holding an earlier run's checkpoint — is byte-identical
// after the refused run, and none was added. docs/errors.md lists every
// message with its cause and fix; keep the two in step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <memory>

#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

const std::string kModel = "model: {type: mlp, in_features: 4, hidden: [8], num_classes: 2}\n";
// 16 samples in batches of 8: two iterations, well under a second.
const std::string kTrainData =
    "data:\n"
    "  train: {dataset: {type: synthetic_classification, num_samples: 16, num_features: 4, "
    "num_classes: 2}, batch_size: 8, num_workers: 0}\n";
const std::string kRest =
    "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n"
    "train_cfg: {max_epochs: 1}\n"
    "hooks:\n"
    "  - {type: checkpoint}\n";
// A complete, valid job: what the earlier run in work/ was trained with.
const std::string kJob = "work_dir: work\nseed: 1\n" + kModel + kTrainData + kRest;

const std::string kImagePipeline =
    "[{type: LoadImageFromFile}, {type: CenterCrop, crop_size: 16}, {type: PackInputs}]";
// A convnet trained on the image folder `data_prefix` (MMPretrain's
// CustomDataset), its images normalised by a data_preprocessor:
// `dataset_lines` are more keys of the dataset (each "      key: value\n").
std::string image_job(const std::string& dataset_lines,
                      const std::string& pipeline = kImagePipeline,
                      const std::string& data_prefix = "train") {
  return "work_dir: work\n"
         "model: {type: convnet, num_classes: 2, width: 4, blocks: [1]}\n"
         "data_preprocessor: {mean: [123.675, 116.28, 103.53], std: [58.395, 57.12, 57.375]}\n"
         "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n"
         "train_cfg: {max_epochs: 1}\n"
         "data:\n"
         "  train:\n"
         "    batch_size: 2\n"
         "    num_workers: 2\n"
         "    dataset:\n"
         "      type: CustomDataset\n"
         "      data_prefix: " +
         data_prefix + "\n" + dataset_lines + "      pipeline: " + pipeline + "\n";
}

// kJob whose training loader has `keys` (", key: value ...") added.
std::string job_with_loader_keys(const std::string& keys) {
  return "work_dir: work\nseed: 1\n" + kModel +
         "data:\n"
         "  train: {dataset: {type: synthetic_classification, num_samples: 16, num_features: 4, "
         "num_classes: 2}, batch_size: 8, num_workers: 0" +
         keys + "}\n" + kRest;
}

std::string runner_host() { return quote(RH_RUNNER_HOST); }

// Every path under `root` (relative) with its bytes; folders map to "<dir>".
using Snapshot = std::map<std::string, std::string>;
Snapshot snapshot(const fs::path& root) {
  Snapshot s;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    s[rel] = e.is_directory() ? "<dir>" : "file:" + rh::test::read_file(e.path());
  }
  return s;
}
std::string describe_changes(const Snapshot& before, const Snapshot& after) {
  std::string out;
  for (const auto& [path, bytes] : before) {
    auto it = after.find(path);
    if (it == after.end())
      out += "  removed " + path + "\n";
    else if (it->second != bytes)
      out += "  changed " + path + "\n";
  }
  for (const auto& [path, bytes] : after)
    if (before.count(path) == 0) out += "  added " + path + "\n";
  return out;
}

// One earlier run's work_dir (epoch_1/ and latest), trained once per process
// and copied into each test that needs a real checkpoint.
const fs::path& trained_work_dir() {
  static std::unique_ptr<rh::test::TempDir> dir;
  if (!dir) {
    dir = std::make_unique<rh::test::TempDir>();
    dir->write("job.yaml", kJob);
    auto r =
        rh::test::run_command("cd " + quote(dir->path().string()) + " && env -u RH_PLUGIN_PATH " +
                              runner_host() + " --config job.yaml");
    if (r.exit_code != 0 || !fs::exists(dir->path() / "work/epoch_1/meta.json"))
      throw std::runtime_error("the baseline training run failed:\n" + r.output);
  }
  static const fs::path work = dir->path() / "work";
  return work;
}

class BadInputCorpusTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  void SetUp() override {
    // Output of an earlier run that a refused run must leave alone.
    dir.write("work/metrics.jsonl", "{\"mode\": \"train\", \"iter\": 1, \"loss\": 0.5}\n");
  }

  // Replaces work/ by a copy of a trained work_dir (epoch_1/, latest).
  void with_checkpoint() {
    fs::remove_all(dir / "work");
    fs::copy(trained_work_dir(), dir / "work", fs::copy_options::recursive);
  }
  static std::string plugin(const std::string& name) {
    return (fs::path(RH_TEST_PLUGIN_DIR) / ("lib" + name + ".so")).string();
  }

  // Runs runner-host in the test directory and checks the exit code, that
  // the output holds every `expected` piece, and that nothing changed.
  void expect_refused(const std::string& args, int exit_code,
                      std::initializer_list<std::string> expected) {
    const Snapshot before = snapshot(dir.path());
    auto r = rh::test::run_command("cd " + quote(dir.path().string()) +
                                   " && env -u RH_PLUGIN_PATH " + runner_host() + " " + args);
    EXPECT_EQ(r.signal, 0) << "runner-host crashed:\n" << r.output;
    EXPECT_EQ(r.exit_code, exit_code) << r.output;
    for (const std::string& text : expected) EXPECT_THAT(r.output, HasSubstr(text));
    const std::string changes = describe_changes(before, snapshot(dir.path()));
    EXPECT_TRUE(changes.empty()) << "the refused run changed files:\n" << changes << r.output;
  }
  // The job file job.yaml, then expect_refused("--config job.yaml " + args).
  void expect_job_refused(const std::string& yaml, const std::string& args, int exit_code,
                          std::initializer_list<std::string> expected) {
    dir.write("job.yaml", yaml);
    expect_refused("--config job.yaml " + args, exit_code, expected);
  }
  // A job whose training set is `dataset` (a flow map), run for real: data
  // files are read when the loaders are built, after validation.
  void expect_dataset_refused(const std::string& dataset,
                              std::initializer_list<std::string> expected) {
    expect_job_refused(
        "work_dir: work\nmodel: {type: mlp, in_features: 2, num_classes: 2}\n"
        "train_cfg: {max_epochs: 1}\ndata:\n  train: {dataset: " +
            dataset + ", batch_size: 2}\n",
        "", 2, expected);
  }
  std::string at(const std::string& file) const { return (dir / file).string(); }
  // Writes train/<class>/<i>.JPEG with Pillow, classes a and b, 4 images
  // each (samples 0..7 in CustomDataset's order: a/0..3, b/0..3).
  void write_image_folder() {
    dir.write("make_images.py", R"(
import os, numpy as np
from PIL import Image
rng = np.random.default_rng(0)
for name in ['a', 'b']:
    os.makedirs(os.path.join('train', name), exist_ok=True)
    for i in range(4):
        img = rng.integers(0, 255, (48, 64, 3), dtype=np.uint8)
        Image.fromarray(img).save(os.path.join('train', name, f'{i}.JPEG'))
)");
    const auto r = rh::test::run_command("cd " + quote(dir.path().string()) +
                                         " && /usr/bin/python3 make_images.py");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
};

// ============================== config ==========================================

TEST_F(BadInputCorpusTest, ConfigUnknownTopLevelKeySuggestsTheClosest) {
  expect_job_refused(kJob + "work_dri: elsewhere\n", "--dry-run", 2,
                     {"job.yaml:10:1: work_dri: unknown key (did you mean 'work_dir'?)"});
}

// env_cfg.blas_coretype names a core OpenBLAS does not run: refused at the
// key before LibTorch loads (a probe ran OpenBLAS with that core).
TEST_F(BadInputCorpusTest, ConfigBlasCoretypeThatOpenBlasDoesNotRun) {
  expect_job_refused(kJob + "env_cfg: {blas_coretype: Skylakx}\n", "--dry-run", 2,
                     {"job.yaml:10:26: env_cfg.blas_coretype: OpenBLAS ",
                      " does not know the core 'Skylakx' or will not run it on this CPU: with "
                      "OPENBLAS_CORETYPE=Skylakx it ran its ",
                      " kernels (did you mean 'SkylakeX'?); name a core this CPU runs"});
}

TEST_F(BadInputCorpusTest, ConfigQuotedNumberIsAString) {
  expect_job_refused("model: {type: mlp, in_features: \"4\", num_classes: 2}\n", "--dry-run", 2,
                     {"job.yaml:1:33: model.in_features: expected an integer, got '4' (a quoted "
                      "string; remove the quotes)"});
}

TEST_F(BadInputCorpusTest, ConfigValueOutOfRange) {
  expect_job_refused(kModel + "train_cfg: {max_epochs: 2, val_interval: 0}\n", "--dry-run", 2,
                     {"job.yaml:2:42: train_cfg.val_interval: must be >= 1, got 0"});
}

TEST_F(BadInputCorpusTest, ConfigMissingRequiredKeyInAMap) {
  expect_job_refused("model: {type: mlp, in_features: 4}\n", "--dry-run", 2,
                     {"job.yaml:1:8: model: missing required key 'num_classes'"});
}

TEST_F(BadInputCorpusTest, ConfigListExpected) {
  expect_job_refused(kModel + "hooks: {type: trace}\n", "--dry-run", 2,
                     {"job.yaml:2:8: hooks: expected a list, got a map"});
}

TEST_F(BadInputCorpusTest, ConfigDuplicateKey) {
  expect_job_refused(kModel + "seed: 1\nseed: 2\n", "--dry-run", 2,
                     {"job.yaml:3:1: seed: duplicate key 'seed' (first defined at line 2)"});
}

TEST_F(BadInputCorpusTest, ConfigYamlSyntaxErrorHasLineAndColumn) {
  expect_job_refused(kModel + "\ttrain_cfg: {max_epochs: 1}\n", "--dry-run", 2,
                     {"job.yaml:2:2: YAML syntax error: end of map not found"});
}

TEST_F(BadInputCorpusTest, ConfigYamlSyntaxErrorInABaseIsLocatedInTheBase) {
  dir.write("base/bad.yaml", "model: {type: mlp, in_features: 4, num_classes: 2\n");
  expect_job_refused("_base_: base/bad.yaml\n", "--dry-run", 2,
                     {"base/bad.yaml:2:1: YAML syntax error: end of map flow not found"});
}

TEST_F(BadInputCorpusTest, ConfigEmptyJobFile) {
  expect_job_refused("", "--dry-run", 2,
                     {"job.yaml: the job file must be a map of keys, got null"});
}

TEST_F(BadInputCorpusTest, ConfigBaseThatIncludesItself) {
  expect_job_refused("_base_: job.yaml\n" + kModel, "--dry-run", 2,
                     {"job.yaml:1:9: _base_: include cycle: job.yaml -> job.yaml"});
}

TEST_F(BadInputCorpusTest, ConfigMissingBaseNamesTheResolvedPath) {
  expect_job_refused("_base_: [base/none.yaml]\n" + kModel, "--dry-run", 2,
                     {"job.yaml:1:10: _base_.0: cannot read included file 'base/none.yaml' "
                      "(resolved to " +
                      at("base/none.yaml") + "): No such file or directory"});
}

TEST_F(BadInputCorpusTest, ConfigSetWithAnEmptyKeySegment) {
  expect_job_refused(kJob, "--dry-run --set train_cfg..max_epochs=3", 2,
                     {"--set 'train_cfg..max_epochs=3': expected key.path=value, got "
                      "'train_cfg..max_epochs=3' (empty key segment)"});
}

TEST_F(BadInputCorpusTest, ConfigSetWithAValueThatIsNotYaml) {
  expect_job_refused(kJob, "--dry-run --set 'model.hidden=[1,'", 2,
                     {"--set 'model.hidden=[1,': model.hidden: cannot parse the value: YAML "
                      "syntax error"});
}

TEST_F(BadInputCorpusTest, ConfigSetValueOutOfRangeNamesTheOverride) {
  expect_job_refused(kJob, "--dry-run --set model.num_classes=1", 2,
                     {"--set 'model.num_classes=1': model.num_classes: must be >= 2, got 1"});
}

// An image pipeline's transform that runner-host does not have: refused by
// the schema, so --dry-run finds it too.
TEST_F(BadInputCorpusTest, ConfigUnknownPipelineTransformListsTheChoices) {
  expect_job_refused(
      image_job("",
                "[{type: LoadImageFromFile}, {type: ColorJitter, brightness: 0.4}, "
                "{type: PackInputs}]"),
      "--dry-run", 2,
      {"job.yaml:13:52: data.train.dataset.pipeline.1.type: unknown transform type "
       "'ColorJitter'; choices: CenterCrop, LoadImageFromFile, PackInputs, RandAugment, "
       "RandomErasing, RandomFlip, RandomResizedCrop, ResizeEdge"});
}

// A key's value that the transform does not implement: refused when the
// job is checked (the pipelines are built, no file read), so --dry-run
// finds it too.
TEST_F(BadInputCorpusTest, ConfigPipelineValueThatIsNotImplemented) {
  expect_job_refused(
      image_job("", "[{type: LoadImageFromFile, to_float32: true}, {type: PackInputs}]"),
      "--dry-run", 2,
      {"job.yaml:13:56: data.train.dataset.pipeline.0.to_float32: true is not implemented: "
       "images stay 8-bit until the data_preprocessor"});
  expect_job_refused(
      image_job("", "[{type: LoadImageFromFile, ignore_empty: true}, {type: PackInputs}]"), "", 2,
      {"job.yaml:13:58: data.train.dataset.pipeline.0.ignore_empty: true is not implemented: an "
       "unreadable file is an error"});
}

TEST_F(BadInputCorpusTest, ConfigImageDatasetWithoutLabelsIsNotImplemented) {
  expect_job_refused(image_job("      with_label: false\n"), "--dry-run", 2,
                     {"job.yaml:13:19: data.train.dataset.with_label: false (unlabelled images) "
                      "is not implemented: runner-host trains and evaluates classifiers on "
                      "labelled images"});
}

// The loader's keys that say one thing twice (PyTorch's and MMEngine's
// spelling beside runner-host's): refused when the job is checked.
TEST_F(BadInputCorpusTest, ConfigPrefetchFactorBesidePrefetch) {
  expect_job_refused(job_with_loader_keys(", prefetch: 4, prefetch_factor: 2"), "--dry-run", 2,
                     {"job.yaml:5:165: data.train.prefetch_factor: give prefetch_factor (per "
                      "worker) or prefetch (in all, job.yaml:5:145), not both"});
}

TEST_F(BadInputCorpusTest, ConfigSamplerShuffleBesideShuffle) {
  expect_job_refused(
      job_with_loader_keys(", shuffle: true, sampler: {type: DefaultSampler, shuffle: false}"), "",
      2,
      {"job.yaml:5:191: data.train.sampler.shuffle: give shuffle here or beside batch_size, not "
       "both"});
}

// ---- what the run asks of the job: checked before a rank is launched --------

// The job without its train_cfg line: training (the default mode) needs it.
const std::string kJobWithoutTrainCfg = "work_dir: work\nseed: 1\n" + kModel + kTrainData +
                                        "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n";

// Refused by --dry-run, by a run, and by the launcher before it starts a
// rank (the message once, from the program, and no rank's exit).
TEST_F(BadInputCorpusTest, ConfigTrainModeWithoutTrainCfg) {
  const char* kMessage =
      "job.yaml:1:1: train mode needs train_cfg (max_epochs or max_iters); --mode val or "
      "--mode test evaluate without it";
  expect_job_refused(kJobWithoutTrainCfg, "--dry-run", 2, {kMessage});
  expect_job_refused(kJobWithoutTrainCfg, "", 2, {kMessage});
  dir.write("job.yaml", kJobWithoutTrainCfg);
  auto r = rh::test::run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " +
                                 runner_host() +
                                 " --config job.yaml --nproc-per-node 2 --master-port 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(kMessage));
  EXPECT_THAT(r.output, Not(HasSubstr("[rank "))) << "a rank was launched";
  EXPECT_FALSE(fs::exists(dir / "work" / "job.yaml"));
}

TEST_F(BadInputCorpusTest, ConfigValModeWithoutValData) {
  expect_job_refused(kJob, "--mode val --dry-run", 2,
                     {"job.yaml:1:1: data: --mode val needs data.val"});
}

// AmpOptimWrapper in float16 where LibTorch can only run on the CPU and has
// no CPU float16 autocast (before 2.4): refused when the strategy is
// created (step 1), so by --dry-run; LibTorch 2.4 and later run it.
TEST_F(BadInputCorpusTest, ConfigAmpFloat16OnACpuOnlyLibTorch) {
  const std::string job = "work_dir: work\nseed: 1\n" + kModel + kTrainData +
                          "optim_wrapper: {type: AmpOptimWrapper, dtype: float16, optimizer: "
                          "{type: SGD, lr: 0.1}}\ntrain_cfg: {max_epochs: 1}\n";
  if (RH_TEST_CPU_FP16) {
    expect_job_refused(job, "--dry-run", 0, {"dry run: the job is valid"});
    return;
  }
  expect_job_refused(job, "--dry-run", 2,
                     {"job.yaml:6:47: optim_wrapper.dtype: AmpOptimWrapper in float16 on the "
                      "CPU: LibTorch ",
                      " has no float16 autocast (or matrix multiply) on the CPU; use dtype: "
                      "bfloat16, or train on a GPU"});
}

// fsdp's float16 parameters on a CPU-only LibTorch 1.x (no float16 matrix
// multiply on the CPU): refused at create, where SetupEnv refused it after
// the rendezvous (exit 1); LibTorch 2.x trains in it.
TEST_F(BadInputCorpusTest, PluginFsdpFloat16OnACpuOnlyLibTorch) {
  const std::string job =
      kJob + "strategy: {type: fsdp, mixed_precision: {param_dtype: float16}}\n";
  if (!RH_TEST_TORCH1) {
    expect_job_refused(job, "--dry-run", 0, {"dry run: the job is valid"});
    return;
  }
  expect_job_refused(job, "--dry-run", 2,
                     {"job.yaml:10:55: strategy.mixed_precision.param_dtype: float16 on the CPU: "
                      "LibTorch ",
                      " has no float16 matrix multiply on the CPU; use bfloat16 or run on a GPU"});
}

// clip_grad beside a strategy that hands the optimizer its own tensors
// without ReduceGradNorm: refused at create (step 1), by --dry-run, where
// it came at step 7, after the rendezvous and the model.
TEST_F(BadInputCorpusTest, PluginClipGradWithoutReduceGradNorm) {
  const std::string job = "work_dir: work\nseed: 1\n" + kModel + kTrainData +
                          "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}, clip_grad: "
                          "{max_norm: 1.0}}\ntrain_cfg: {max_epochs: 1}\nstrategy: {type: "
                          "own_optimizer, plugin: " +
                          plugin("rh_test_own_optimizer") + "}\n";
  // Under the launcher: local rank 0 checks the job and its plugins while
  // the other rank waits (launch/LaunchGate.hpp); the launcher prints the
  // refusal once, unprefixed, and no rank goes on.
  dir.write("job.yaml", job);
  auto r = rh::test::run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " +
                                 runner_host() +
                                 " --config job.yaml --nproc-per-node 2 --master-port 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const std::string message = "job.yaml:6:61: optim_wrapper.clip_grad: strategy 'own_optimizer'";
  ASSERT_THAT(r.output, HasSubstr(message));
  EXPECT_EQ(r.output.find(message), r.output.rfind(message)) << "said more than once:\n"
                                                             << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("[rank "))) << "a rank was launched";
  expect_job_refused(job, "--dry-run", 2,
                     {"job.yaml:6:61: optim_wrapper.clip_grad: strategy 'own_optimizer'",
                      " hands the optimizer its own tensors (OptimizerParams) and has no "
                      "ReduceGradNorm (ABI 1.3): clip_grad needs the gradient norm over every "
                      "rank's shards"});
}

// The models' rules between keys (their builders'), found when the job is
// checked: --dry-run, and each rank before anything is created.
TEST_F(BadInputCorpusTest, ModelLlamaHeadsThatShareNoKeyValueHeads) {
  expect_job_refused(
      "work_dir: work\nmodel: {type: llama, vocab_size: 96, dim: 32, n_heads: 4, n_kv_heads: 3}\n" +
          kTrainData + kRest,
      "--dry-run", 2,
      {"job.yaml:2:71: model.n_kv_heads: n_heads 4 is not a multiple of n_kv_heads 3 (each "
       "key/value head serves n_heads / n_kv_heads query heads)"});
}

TEST_F(BadInputCorpusTest, ModelGptDimThatHeadsDoNotDivide) {
  expect_job_refused("work_dir: work\nmodel: {type: gpt, vocab_size: 96, dim: 60, heads: 8}\n" +
                         kTrainData + kRest,
                     "--dry-run", 2, {"job.yaml:2:52: model.heads: dim 60 is not a multiple of heads 8"});
}

TEST_F(BadInputCorpusTest, ModelTorchScriptFileMissing) {
  expect_job_refused(
      "work_dir: work\nmodel: {type: torchscript, path: nope.pt}\n" + kTrainData + kRest, "", 2,
      {"job.yaml:2:34: model.path: cannot load TorchScript module '" + at("nope.pt") +
       "': no such file"});
}

TEST_F(BadInputCorpusTest, ModelTorchScriptFileThatIsNotAnArchive) {
  dir.write("model.pt", "not a zip archive");
  expect_job_refused(
      "work_dir: work\nmodel: {type: torchscript, path: model.pt}\n" + kTrainData + kRest, "", 2,
      {"job.yaml:2:34: model.path: cannot load TorchScript module '" + at("model.pt") + "'",
       "not a ZIP archive"});
}

// ============================== CLI =============================================

TEST_F(BadInputCorpusTest, CliUnknownMode) {
  expect_job_refused(kJob, "--mode bogus", 2,
                     {"--mode: expected train, val or test, got 'bogus' (see runner-host --help)"});
}

TEST_F(BadInputCorpusTest, CliZeroProcessesPerNode) {
  expect_job_refused(kJob, "--nproc-per-node 0", 2,
                     {"--nproc-per-node: expected 1 or more, got 0"});
}

TEST_F(BadInputCorpusTest, CliProcessesPerNodeThatIsNotANumber) {
  expect_job_refused(kJob, "--nproc-per-node two", 2,
                     {"the argument ('two') for option '--nproc-per-node' is invalid"});
}

TEST_F(BadInputCorpusTest, CliConfigFileMissing) {
  expect_refused("--config nope.yaml", 2,
                 {"nope.yaml: cannot read file: No such file or directory"});
}

TEST_F(BadInputCorpusTest, CliConfigThatIsADirectory) {
  expect_refused("--config work", 2, {"work: cannot read file: Is a directory"});
}

TEST_F(BadInputCorpusTest, CliBadLogLevel) {
  expect_job_refused(kJob, "--dry-run --log-level verbose", 2,
                     {"--log-level: expected trace, debug, info, warn or error, got 'verbose'"});
}

TEST_F(BadInputCorpusTest, CliNodeRankOutOfRange) {
  expect_job_refused(kJob, "--nnodes 2 --node-rank 2", 2,
                     {"--node-rank: expected 0 to 1 (--nnodes 2), got 2"});
}

TEST_F(BadInputCorpusTest, CliMasterPortOutOfRange) {
  expect_job_refused(kJob, "--nproc-per-node 2 --master-port 70000", 2,
                     {"--master-port: expected 0 to 65535, got 70000"});
}

TEST_F(BadInputCorpusTest, CliFreePortWithSeveralNodesConflicts) {
  expect_job_refused(kJob, "--nproc-per-node 2 --nnodes 2 --master-port 0", 2,
                     {"--master-port 0 (pick a free port) needs --nnodes 1: every node must be "
                      "given the same port"});
}

TEST_F(BadInputCorpusTest, CliMinNodesWithoutMaxRestarts) {
  expect_job_refused(kJob, "--nproc-per-node 2 --nnodes 2 --min-nodes 1", 2,
                     {"--min-nodes 1 needs --max-restarts: without restarts a lost node ends the "
                      "job whatever the minimum"});
}

TEST_F(BadInputCorpusTest, CliMinNodesAboveNnodes) {
  expect_job_refused(kJob, "--nnodes 2 --max-restarts 1 --min-nodes 3", 2,
                     {"--min-nodes: expected 1 to --nnodes 2, got 3"});
}

// Found by this corpus, fixed: a word that is no option (`--set a=1 b=2`:
// b=2) was dropped by boost without a word and the run went on with b unset.
TEST_F(BadInputCorpusTest, CliStrayArgumentIsRefused) {
  expect_job_refused(kJob, "--dry-run --set seed=2 train_cfg.max_epochs=3", 2,
                     {"unexpected argument 'train_cfg.max_epochs=3'"});
}

// ============================== plugins =========================================

// train_cfg last, so that the lines above keep their numbers: a job
// trained without it is refused before its plugins are loaded.
const std::string kLastTrainCfg = "train_cfg: {max_epochs: 1}\n";

std::string job_with_hook(const std::string& hook_lines) {
  return kModel + "hooks:\n  - type: " + hook_lines + kLastTrainCfg;
}

TEST_F(BadInputCorpusTest, PluginFileNotFound) {
  expect_job_refused(job_with_hook("trace\n    plugin: missing/libx.so\n"), "--dry-run", 2,
                     {"job.yaml:4:13: hooks.0.plugin: cannot use plugin " + at("missing/libx.so") +
                      ": no such file"});
}

TEST_F(BadInputCorpusTest, PluginPathThatIsADirectory) {
  expect_job_refused(
      job_with_hook("trace\n    plugin: work\n"), "--dry-run", 2,
      {"job.yaml:4:13: hooks.0.plugin: cannot use plugin " + at("work") + ": not a regular file"});
}

TEST_F(BadInputCorpusTest, PluginThatIsNotASharedLibrary) {
  dir.write("plugins/libfake.so", std::string(4096, 'x'));
  expect_job_refused(job_with_hook("trace\n    plugin: plugins/libfake.so\n"), "--dry-run", 2,
                     {"job.yaml:4:13: hooks.0.plugin: cannot use plugin " +
                          at("plugins/libfake.so") + ": cannot load the shared library",
                      "invalid ELF header"});
}

TEST_F(BadInputCorpusTest, PluginWithAnotherAbiMajor) {
  expect_job_refused(
      job_with_hook("wrong_major\n    plugin: " + plugin("rh_test_wrong_major") + "\n"),
      "--dry-run", 2,
      {"job.yaml:4:13: hooks.0.plugin: cannot use plugin " + plugin("rh_test_wrong_major") +
           ": built for runner-host ABI 2.0 but this host speaks ABI ",
       "(the major versions must match): rebuild the plugin against SDK 1.x"});
}

TEST_F(BadInputCorpusTest, PluginWithAnotherNativeTag) {
  expect_job_refused(
      job_with_hook("native_mismatch\n    plugin: " + plugin("rh_test_native_mismatch") + "\n"),
      "--dry-run", 2,
      {"hooks.0.plugin: cannot use plugin " + plugin("rh_test_native_mismatch") +
           ": native ABI tag mismatch: the plugin was built against torch 0.0.0-test",
       "rebuild the plugin against the host's LibTorch"});
}

TEST_F(BadInputCorpusTest, PluginThatDeclinesTheHostsAbi) {
  expect_job_refused(job_with_hook("null_info\n    plugin: " + plugin("rh_test_null_info") + "\n"),
                     "--dry-run", 2,
                     {"hooks.0.plugin: cannot use plugin " + plugin("rh_test_null_info") +
                      ": rh_plugin_info() returned NULL: the plugin declines ABI "});
}

TEST_F(BadInputCorpusTest, PluginWithANullRequiredEntry) {
  expect_job_refused(
      job_with_hook("null_required\n    plugin: " + plugin("rh_test_null_required") + "\n"),
      "--dry-run", 2,
      {"hooks.0.plugin: cannot use plugin " + plugin("rh_test_null_required") +
       ": hook 'null_required': required vtable entry OnEvent is NULL"});
}

TEST_F(BadInputCorpusTest, PluginThatDoesNotProvideTheType) {
  expect_job_refused(job_with_hook("nosuch\n    plugin: " + plugin("rh_test_helper_hook") + "\n"),
                     "--dry-run", 2,
                     {"job.yaml:3:11: hooks.0.type: plugin " + plugin("rh_test_helper_hook") +
                      " provides no hook 'nosuch' (it provides hook 'helper_hook', strategy "
                      "'helper_strategy', checkpoint_io 'helper_io')"});
}

TEST_F(BadInputCorpusTest, PluginTypeNotFoundSuggestsTheClosest) {
  expect_job_refused(kModel + "checkpoint_io: {type: safetensor}\n" + kLastTrainCfg, "--dry-run", 2,
                     {"job.yaml:2:23: checkpoint_io.type: no checkpoint_io plugin provides type "
                      "'safetensor' (did you mean 'safetensors'?)",
                      "librh_ckpt_io_safetensor.so", "searched: install " RH_PLUGIN_OUTPUT_DIR});
}

TEST_F(BadInputCorpusTest, PluginUnknownKeyInItsSubtree) {
  expect_job_refused(job_with_hook("checkpoint\n    intervl: 2\n"), "--dry-run", 2,
                     {"job.yaml:4:5: hooks.0.intervl: unknown key for hook 'checkpoint' (did you "
                      "mean 'interval'?)"});
}

TEST_F(BadInputCorpusTest, PluginKeyOfTheWrongTypeNamesThePlugin) {
  expect_job_refused(job_with_hook("checkpoint\n    interval: zero\n"), "--dry-run", 2,
                     {"hook 'checkpoint' (rh_hook_checkpoint, " RH_PLUGIN_OUTPUT_DIR
                      "/librh_hook_checkpoint.so): Create failed: job.yaml:4:15: "
                      "hooks.0.interval: expected an integer, got 'zero'"});
}

TEST_F(BadInputCorpusTest, PluginStrategyKeyOutOfRange) {
  expect_job_refused(kModel + "strategy: {type: ddp, bucket_cap_mb: -1}\n" + kLastTrainCfg,
                     "--dry-run", 2,
                     {"strategy 'ddp' (rh_strategy_ddp, " RH_PLUGIN_OUTPUT_DIR
                      "/librh_strategy_ddp.so): Create failed: job.yaml:2:38: "
                      "strategy.bucket_cap_mb: must be > 0"});
}

TEST_F(BadInputCorpusTest, PluginHookPriorityOutOfRange) {
  expect_job_refused(job_with_hook("checkpoint\n    priority: 200\n"), "--dry-run", 2,
                     {"job.yaml:4:15: hooks.0.priority: must be <= 100, got 200"});
}

// ============================== data files ======================================

TEST_F(BadInputCorpusTest, DataCsvFileMissing) {
  expect_dataset_refused(
      "{type: csv, path: data/train.csv}",
      {"job.yaml:5:38: data.train.dataset.path: cannot read the CSV file '" + at("data/train.csv") +
       "': No such file or directory (relative paths are resolved against the "
       "job directory)"});
}

TEST_F(BadInputCorpusTest, DataCsvRaggedRow) {
  dir.write("data/train.csv", "a,b,label\n1,2,0\n3,4\n");
  expect_dataset_refused("{type: csv, path: data/train.csv}",
                         {at("data/train.csv") + ":3:1: data.train.dataset.path: row has 2 "
                                                 "fields, expected 3 (the header has 3)"});
}

TEST_F(BadInputCorpusTest, DataCsvCellThatIsNotANumber) {
  dir.write("data/train.csv", "a,b,label\n1,2,0\n3,x,1\n");
  expect_dataset_refused("{type: csv, path: data/train.csv}",
                         {at("data/train.csv") + ":3:3: data.train.dataset.path: column 'b' "
                                                 "(index 1): expected a number, got 'x'"});
}

TEST_F(BadInputCorpusTest, DataCsvLabelThatIsNotAClassId) {
  dir.write("data/train.csv", "a,b,label\n1,2,0.5\n");
  expect_dataset_refused("{type: csv, path: data/train.csv}",
                         {at("data/train.csv") + ":2:5: data.train.dataset.path: label column "
                                                 "'label' (index 2): expected a class id (an "
                                                 "integer >= 0), got '0.5'"});
}

TEST_F(BadInputCorpusTest, DataCsvWithoutDataRows) {
  dir.write("data/train.csv", "a,b,label\n");
  expect_dataset_refused("{type: csv, path: data/train.csv}",
                         {"job.yaml:5:38: data.train.dataset.path: '" + at("data/train.csv") +
                          "' has no data rows after its header"});
}

TEST_F(BadInputCorpusTest, DataCsvLabelColumnNameNotInTheHeader) {
  dir.write("data/train.csv", "a,b,label\n1,2,0\n");
  expect_dataset_refused("{type: csv, path: data/train.csv, label_column: class}",
                         {"job.yaml:5:68: data.train.dataset.label_column: no column named "
                          "'class' in '" +
                          at("data/train.csv") + "' (columns: a, b, label)"});
}

// An idx header: big-endian 32-bit words.
std::string idx_header(std::initializer_list<uint32_t> words) {
  std::string out;
  for (uint32_t w : words)
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((w >> shift) & 0xff);
  return out;
}

TEST_F(BadInputCorpusTest, DataMnistImagesTruncated) {
  // The header promises 10 images of 28x28; 100 pixel bytes follow.
  dir.write("mnist/train-images-idx3-ubyte",
            idx_header({2051, 10, 28, 28}) + std::string(100, '\0'));
  dir.write("mnist/train-labels-idx1-ubyte", idx_header({2049, 10}) + std::string(10, '\0'));
  expect_dataset_refused(
      "{type: mnist, root: mnist}",
      {"job.yaml:5:40: data.train.dataset.root: '" + at("mnist/train-images-idx3-ubyte") +
       "' is truncated: expected 7856 bytes (16-byte header + 10 images of "
       "28x28), found 116"});
}

TEST_F(BadInputCorpusTest, DataMnistWrongMagicSaysGzip) {
  dir.write("mnist/train-images-idx3-ubyte", "\x1f\x8b\x08" + std::string(100, '\0'));
  expect_dataset_refused(
      "{type: mnist, root: mnist}",
      {"job.yaml:5:40: data.train.dataset.root: '" + at("mnist/train-images-idx3-ubyte") +
       "' is not an idx image (idx3) file: magic number 529205248, expected "
       "2051 (is it still gzip-compressed?)"});
}

TEST_F(BadInputCorpusTest, DataMnistRootWithoutTheFiles) {
  fs::create_directories(dir / "mnist");
  expect_dataset_refused("{type: mnist, root: mnist}",
                         {"job.yaml:5:40: data.train.dataset.root: cannot read the MNIST image "
                          "file '" +
                          at("mnist/train-images-idx3-ubyte") + "': No such file or directory"});
}

TEST_F(BadInputCorpusTest, DataCifarBatchOfTheWrongSize) {
  dir.write("cifar/data_batch_1.bin", std::string(3000, '\0'));
  expect_dataset_refused(
      "{type: cifar10, root: cifar}",
      {"job.yaml:5:42: data.train.dataset.root: '" + at("cifar/data_batch_1.bin") +
       "' is corrupt: its size 3000 bytes is not a positive multiple of 3073"});
}

TEST_F(BadInputCorpusTest, DataCifarRootOneFolderTooHigh) {
  dir.write("cifar/cifar-10-batches-bin/data_batch_1.bin", std::string(3073, '\0'));
  expect_dataset_refused("{type: cifar10, root: cifar}",
                         {"job.yaml:5:42: data.train.dataset.root: cannot read the CIFAR-10 batch "
                          "file '" +
                          at("cifar/data_batch_1.bin") + "': it is in '" +
                          at("cifar/cifar-10-batches-bin") + "'; set root to that folder"});
}

TEST_F(BadInputCorpusTest, DataCharLmEmptyText) {
  dir.write("data/text.txt", "");
  expect_dataset_refused("{type: char_lm, path: data/text.txt}",
                         {"job.yaml:5:42: data.train.dataset.path: '" + at("data/text.txt") +
                          "' is too short for block_size 64: its train split has 0 bytes"});
}

TEST_F(BadInputCorpusTest, DataTokenBinNotAWholeNumberOfTokens) {
  dir.write("data/train.bin", std::string(7, '\1'));
  expect_dataset_refused("{type: token_bin, path: data/train.bin}",
                         {"job.yaml:5:44: data.train.dataset.path: '" + at("data/train.bin") +
                          "': 7 bytes is not a whole number of 2-byte tokens"});
}

TEST_F(BadInputCorpusTest, DataMegatronIndexWithoutItsMagic) {
  dir.write("data/corpus.bin", std::string(64, '\1'));
  dir.write("data/corpus.idx", std::string(40, 'x'));
  expect_dataset_refused("{type: megatron_indexed, path_prefix: data/corpus}",
                         {"job.yaml:5:58: data.train.dataset.path_prefix: '" +
                          at("data/corpus.idx") + "': at byte 0: no MMIDIDX magic"});
}

// data_prefix as a folder, or as MMPretrain's {img_path: folder}: the key
// named is the one that gave the folder.
TEST_F(BadInputCorpusTest, DataImageFolderMissing) {
  expect_job_refused(image_job(""), "", 2,
                     {"job.yaml:12:20: data.train.dataset.data_prefix: the image folder '" +
                      at("train") + "' does not exist"});
  expect_job_refused(
      image_job("", kImagePipeline, "{img_path: images}"), "", 2,
      {"job.yaml:12:31: data.train.dataset.data_prefix.img_path: the image folder '" +
       at("images") + "' does not exist"});
}

TEST_F(BadInputCorpusTest, DataImageAnnotationLineWithoutALabel) {
  fs::create_directories(dir / "train");
  dir.write("meta/train.txt", "a/0.JPEG 0\n\nb/0.JPEG\n");
  expect_job_refused(image_job("      ann_file: meta/train.txt\n"), "", 2,
                     {"job.yaml:13:17: data.train.dataset.ann_file: '" + at("meta/train.txt") +
                      "' line 3: expected `relative/path label`, got 'b/0.JPEG'"});
}

// A JPEG cut short is found when a loader worker decodes it, in the middle
// of the epoch: the run stops (exit 1) naming the sample and the file.
TEST_F(BadInputCorpusTest, DataImageCorruptJpegStopsTheRun) {
  write_image_folder();
  const std::string bytes = rh::test::read_file(dir / "train/b/1.JPEG");
  dir.write("train/b/1.JPEG", bytes.substr(0, bytes.size() / 2));
  expect_job_refused(image_job(""), "", 1,
                     {"runner-host: error: sample 5: " + at("train/b/1.JPEG") +
                      ": a corrupt or truncated JPEG (Premature end of JPEG file)"});
}

// ============================== checkpoints =====================================

// The trained job with `line` added (resume:, load_from:).
std::string job_with(const std::string& line) { return kJob + line; }

void flip_last_byte_but_two(const fs::path& file) {
  std::string bytes = rh::test::read_file(file);
  bytes[bytes.size() - 3] ^= 0xff;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

TEST_F(BadInputCorpusTest, CheckpointResumeFromAFolderThatIsNoCheckpoint) {
  with_checkpoint();
  fs::create_directories(dir / "notes");
  expect_job_refused(job_with("resume: notes\n"), "", 2,
                     {"job.yaml:10:9: resume: cannot resume from " + at("notes") + ": " +
                      at("notes/meta.json") + " is missing (an incomplete checkpoint)"});
}

// Found by this corpus, fixed: a resume path that does not exist was
// reported as an incomplete checkpoint ("<dir>/meta.json is missing"),
// which sent the user looking for damage instead of a typo in the path.
TEST_F(BadInputCorpusTest, CheckpointResumeFromAPathThatDoesNotExist) {
  with_checkpoint();
  expect_job_refused(
      job_with("resume: work/epoch_9\n"), "", 2,
      {"job.yaml:10:9: resume: cannot resume from " + at("work/epoch_9") + ": no such directory"});
}

TEST_F(BadInputCorpusTest, CheckpointCorruptedTensorBytesFailTheirCrc) {
  with_checkpoint();
  flip_last_byte_but_two(dir / "work/epoch_1/model.safetensors");
  expect_job_refused(job_with("resume: work/epoch_1\n"), "", 2,
                     {"job.yaml:10:9: resume: cannot resume from " + at("work/epoch_1") + ": " +
                          at("work/epoch_1/model.safetensors") +
                          ": checksum mismatch in tensor 'layers.0.weight': stored crc32 ",
                      "(the data is corrupted)"});
}

TEST_F(BadInputCorpusTest, CheckpointCorruptedRngStateFailsItsCrc) {
  with_checkpoint();
  flip_last_byte_but_two(dir / "work/epoch_1/state.safetensors");
  expect_job_refused(job_with("resume: work/epoch_1\n"), "", 2,
                     {"job.yaml:10:9: resume: cannot resume from " + at("work/epoch_1") + ": " +
                      at("work/epoch_1/state.safetensors") + ": checksum mismatch in tensor "});
}

TEST_F(BadInputCorpusTest, CheckpointTruncatedSafetensors) {
  with_checkpoint();
  fs::resize_file(dir / "work/epoch_1/model.safetensors", 300);
  expect_job_refused(job_with("resume: work/epoch_1\n"), "", 2,
                     {"resume: cannot resume from " + at("work/epoch_1") + ": " +
                          at("work/epoch_1/model.safetensors") + ": header length ",
                      "goes beyond the end of the file (300 bytes): corrupted or truncated"});
}

TEST_F(BadInputCorpusTest, CheckpointMetaJsonThatIsNotJson) {
  with_checkpoint();
  dir.write("work/epoch_1/meta.json", "{not json\n");
  expect_job_refused(job_with("resume: work/epoch_1\n"), "", 2,
                     {"job.yaml:10:9: resume: cannot resume from " + at("work/epoch_1") + ": " +
                      at("work/epoch_1/meta.json") + " is corrupted: "});
}

// `latest` naming no checkpoint is ignored with a warning, never followed;
// resume: auto takes the newest valid checkpoint instead. The run resumes
// at the end of training (max_epochs 1), so it has nothing to save.
TEST_F(BadInputCorpusTest, CheckpointLatestPointingAtGarbageIsSkipped) {
  with_checkpoint();
  dir.write("work/latest", "../../etc\n");
  expect_job_refused(job_with("resume: auto\n"), "", 0,
                     {"resume: skipping invalid checkpoint " + at("work/latest") +
                          ": ignored, its content is not a checkpoint of " + at("work") +
                          ": '../../etc' is not a checkpoint name",
                      "resumed from " + at("work/epoch_1")});
}

TEST_F(BadInputCorpusTest, CheckpointResumeIntoAnotherModel) {
  with_checkpoint();
  expect_job_refused(job_with("resume: auto\n"), "--set 'model.hidden=[4]'", 1,
                     {"checkpoint " + at("work/epoch_1") + " does not match the model:",
                      "mismatched (shape or dtype) (3): layers.0.weight: checkpoint [8, 4] vs "
                      "model [4, 4]"});
}

TEST_F(BadInputCorpusTest, CheckpointLoadFromAnotherModel) {
  with_checkpoint();
  expect_job_refused(
      job_with("load_from: work/epoch_1/model.safetensors\n"),
      "--set 'model={type: mlp, in_features: 4, hidden: [8, 8], num_classes: 2}'", 1,
      {"load_from " + at("work/epoch_1/model.safetensors") + " does not match the model:",
       "missing in the checkpoint (2): layers.1.weight, layers.1.bias"});
}

// Found by this corpus, fixed: load_from naming a file that is neither a
// checkpoint folder nor a .safetensors file took its folder as the
// checkpoint and its stem as the tensor file, with no key path and exit 1.
TEST_F(BadInputCorpusTest, CheckpointLoadFromAFileThatIsNoCheckpoint) {
  with_checkpoint();
  expect_job_refused(job_with("load_from: job.yaml\n"), "", 2,
                     {"job.yaml:10:12: load_from: " + at("job.yaml") +
                      " is neither a checkpoint folder nor a .safetensors file"});
}

// A checkpoint of the format before the tensor table (format_version 1) has
// nothing to reshard from: resume says so and what to do instead.
TEST_F(BadInputCorpusTest, CheckpointResumeOfAnOlderFormat) {
  with_checkpoint();
  const fs::path meta = dir / "work/epoch_1/meta.json";
  std::string text = rh::test::read_file(meta);
  const std::string version = "\"format_version\": 2";
  ASSERT_NE(text.find(version), std::string::npos);
  text.replace(text.find(version), version.size(), "\"format_version\": 1");
  dir.write("work/epoch_1/meta.json", text);
  expect_job_refused(
      job_with("resume: auto\n"), "", 1,
      {"runner-host: error: checkpoint " + at("work/epoch_1") +
           " has format_version 1; this runner-host reads format 2",
       "load_from: " + at("work/epoch_1/model.safetensors") + " starts from its weights"});
}

}  // namespace

// ============================== installation ===================================
// runner-host loads everything past its launcher from
// <prefix>/<libdir>/runner-host/librh_runner.so (host/cli/RunnerEntry.hpp).
class BrokenInstallTest : public BadInputCorpusTest {
 protected:
  // A copy of the program in prefix/bin/, without the library beside it.
  void SetUp() override {
    BadInputCorpusTest::SetUp();
    fs::create_directories(dir / "prefix/bin");
    fs::copy_file(RH_RUNNER_HOST, dir / "prefix/bin/runner-host");
    dir.write("job.yaml", kJob);
  }
  fs::path library() const { return dir / "prefix" / RH_RUNNER_LIBRARY_RELPATH; }
  rh::test::CommandResult run_copy(const std::string& args) {
    return rh::test::run_command("cd " + quote(dir.path().string()) +
                                 " && env -u RH_PLUGIN_PATH prefix/bin/runner-host " + args);
  }
};

TEST_F(BrokenInstallTest, InstallWithoutTheRunnerLibrary) {
  const Snapshot before = snapshot(dir.path());
  auto r = run_copy("--config job.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot load the runner library (reinstall runner-host): " +
                                  library().string() + ": cannot open shared object file"));
  // --help never needs it, nor does the launcher; its workers do: rank 0
  // reports it through the launch gate (launch/LaunchGate.hpp), the launcher
  // prints it once, and rank 1, which cannot load it either, ends without a
  // word when the gate closes.
  auto help = run_copy("--help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("--nproc-per-node"));
  auto launched = run_copy("--config job.yaml --nproc-per-node 2 --master-port 0");
  EXPECT_EQ(launched.exit_code, 2) << launched.output;
  EXPECT_THAT(launched.output, HasSubstr("runner-host: error: cannot load the runner library "
                                         "(reinstall runner-host)"));
  EXPECT_THAT(launched.output, Not(HasSubstr("[rank "))) << "a rank was launched";
  const std::string changes = describe_changes(before, snapshot(dir.path()));
  EXPECT_TRUE(changes.empty()) << "the refused runs changed files:\n" << changes;
}

TEST_F(BrokenInstallTest, InstallWithAnotherLibraryInPlaceOfTheRunnerLibrary) {
  fs::create_directories(library().parent_path());
  fs::copy_file(plugin("rh_test_not_a_plugin"), library());
  auto r = run_copy("--config job.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(library().string() +
                                  " is not runner-host's runner library (no rh_runner_main; "
                                  "reinstall runner-host)"));
}
