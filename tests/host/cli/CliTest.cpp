// runner-host as a user meets it: every bad input gets a message naming
// where the problem is, and exit code 2, before anything is created.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "common/TestUtil.hpp"
#include "rh/rh_abi.h"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// "ABI 1.2": what --version and --list-plugins print for this build.
const std::string kAbi =
    "ABI " + std::to_string(RH_ABI_VERSION_MAJOR) + "." + std::to_string(RH_ABI_VERSION_MINOR);

// train_cfg last, so that the lines above it keep their numbers: a job
// trained (the default mode) without it is refused before its plugins load.
const std::string kLastTrainCfg = "train_cfg: {max_epochs: 1}\n";
const std::string kValidJob =
    "model: {type: mlp, in_features: 4, num_classes: 2}\n"
    "train_cfg: {max_epochs: 2}\n"
    "strategy: {type: single}\n"
    "hooks:\n"
    "  - {type: trace}\n";

class CliTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult run(const std::string& args, const std::string& env = "") {
    return rh::test::run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " +
                                 env + " " + quote(RH_RUNNER_HOST) + " " + args);
  }
  rh::test::CommandResult run_job(const std::string& yaml, const std::string& extra = "") {
    dir.write("job.yaml", yaml);
    return run("--config job.yaml " + extra);
  }
  static std::string plugin(const std::string& name) {
    return (fs::path(RH_TEST_PLUGIN_DIR) / ("lib" + name + ".so")).string();
  }
};

#define EXPECT_INVALID(result, text)                      \
  do {                                                    \
    auto r_ = (result);                                   \
    EXPECT_EQ(r_.exit_code, 2) << r_.output;              \
    EXPECT_THAT(r_.output, HasSubstr(text)) << r_.output; \
  } while (0)

TEST_F(CliTest, ValidJobPassesDryRun) {
  auto r = run_job(kValidJob, "--dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dry run: the job is valid; strategy single, 1 hook(s)"));
  EXPECT_FALSE(fs::exists(dir / "work_dirs")) << "a dry run must not write";
}

TEST_F(CliTest, HelpAndVersion) {
  auto help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.output, HasSubstr("Examples:"));
  EXPECT_THAT(help.output, HasSubstr("--list-plugins"));
  auto version = run("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.output, HasSubstr(kAbi));
  EXPECT_THAT(version.output, HasSubstr("native tag torch "));
}

// The program links no LibTorch (host/cli/RunnerEntry.hpp): the launcher and
// --help start without its ~0.75 s and ~150 MB; librh_runner.so has it.
TEST_F(CliTest, TheProgramLinksNoLibTorchAndItsLibraryDoes) {
  auto program = rh::test::run_command("ldd " + quote(RH_RUNNER_HOST));
  ASSERT_EQ(program.exit_code, 0) << program.output;
  EXPECT_THAT(program.output, Not(HasSubstr("libtorch")));
  EXPECT_THAT(program.output, Not(HasSubstr("libc10")));
  auto library = rh::test::run_command("ldd " + quote(RH_RUNNER_LIBRARY));
  ASSERT_EQ(library.exit_code, 0) << library.output;
  EXPECT_THAT(library.output, HasSubstr("libtorch_cpu"));
}

TEST_F(CliTest, BadCommandLine) {
  EXPECT_INVALID(run("--no-such-flag"), "unrecognised option '--no-such-flag'");
  EXPECT_INVALID(run(""), "--config is required");
}

TEST_F(CliTest, YamlSyntaxErrorGivesLineAndColumn) {
  EXPECT_INVALID(
      run_job(
          "model: {type: mlp, in_features: 4, num_classes: 2}\ntrain_cfg:\n  max_epochs: [1, 2\n"),
      "job.yaml:");
  auto r = run_job(
      "model: {type: mlp, in_features: 4, num_classes: 2}\ntrain_cfg:\n  max_epochs: [1, 2\n");
  EXPECT_THAT(r.output, HasSubstr("YAML syntax error"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("job\\.yaml:[34]:[0-9]+: "));
}

TEST_F(CliTest, UnknownKeySuggestsTheClosest) {
  EXPECT_INVALID(
      run_job("model: {type: mlp, in_features: 4, num_classes: 2}\ntrain_cfg: {max_epoch: 3}\n"),
      "job.yaml:2:13: train_cfg.max_epoch: unknown key (did you mean 'max_epochs'?)");
}

TEST_F(CliTest, WrongTypeSaysWhatWasExpected) {
  EXPECT_INVALID(
      run_job(
          "model: {type: mlp, in_features: 4, num_classes: 2}\ntrain_cfg: {max_epochs: many}\n"),
      "job.yaml:2:25: train_cfg.max_epochs: expected an integer, got 'many'");
}

TEST_F(CliTest, MissingRequiredKey) {
  EXPECT_INVALID(run_job("train_cfg: {max_epochs: 3}\n"), "missing required key 'model'");
}

TEST_F(CliTest, AllErrorsAreReportedAtOnce) {
  auto r = run_job(
      "model: {type: mlp, in_features: 4, num_classes: 2}\ntrain_cfg: {max_epochs: 0}\nseeed: 1\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("train_cfg.max_epochs: must be >= 1, got 0"));
  EXPECT_THAT(r.output, HasSubstr("seeed: unknown key (did you mean 'seed'?)"));
}

TEST_F(CliTest, IncludeCycleIsNamed) {
  dir.write("a.yaml", "_base_: b.yaml\nmodel: {type: mlp, in_features: 4, num_classes: 2}\n");
  dir.write("b.yaml", "_base_: a.yaml\n");
  auto r = run("--config a.yaml --dry-run");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("include cycle"));
  EXPECT_THAT(r.output, HasSubstr("a.yaml -> "));
}

TEST_F(CliTest, MissingIncludeIsNamed) {
  EXPECT_INVALID(
      run_job("_base_: [base/common.yaml]\nmodel: {type: mlp, in_features: 4, num_classes: 2}\n"),
      "cannot read included file 'base/common.yaml'");
}

TEST_F(CliTest, BaseAndOverridesAreMergedInPrintConfig) {
  dir.write("base.yaml",
            "model: {type: mlp, in_features: 4, num_classes: 2, hidden: [64]}\ntrain_cfg: "
            "{max_epochs: 5}\n");
  auto r = run_job("_base_: base.yaml\ntrain_cfg: {max_epochs: 7}\n",
                   "--print-config --set model.hidden=[128] --set seed=3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("- 128"));
  EXPECT_THAT(r.output, HasSubstr("max_epochs: 7"));
  EXPECT_THAT(r.output, HasSubstr("seed: 3"));
  EXPECT_THAT(r.output, Not(HasSubstr("_base_")));
}

TEST_F(CliTest, DefaultStrategyIsSingleAndShownInPrintConfig) {
  auto r = run_job("model: {type: mlp, in_features: 4, num_classes: 2}\n" + kLastTrainCfg,
                   "--print-config");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("strategy:\n  type: single"));
  auto dry =
      run_job("model: {type: mlp, in_features: 4, num_classes: 2}\n" + kLastTrainCfg, "--dry-run");
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("strategy single, 0 hook(s)"));
}

// Issue 31, item 3: val_cfg.type / test_cfg.type name MMEngine's ValLoop /
// TestLoop, which runner-host runs; any other loop is refused (exit 2, the
// key and its place named) instead of being run as a ValLoop.
TEST_F(CliTest, LoopTypesOtherThanValLoopAndTestLoopAreRefused) {
  auto ok =
      run_job(kValidJob + "val_cfg: {type: ValLoop}\ntest_cfg: {type: TestLoop}\n", "--dry-run");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_INVALID(run_job(kValidJob + "val_cfg: {type: MultiValLoop}\n", "--dry-run"),
                 "job.yaml:6:17: val_cfg.type: 'MultiValLoop' is not a loop runner-host runs: it "
                 "runs MMEngine's ValLoop");
  EXPECT_INVALID(run_job(kValidJob, "--dry-run --set test_cfg.type=MultiTestLoop"),
                 "test_cfg.type: 'MultiTestLoop' is not a loop runner-host runs: it runs "
                 "MMEngine's TestLoop");
}

TEST_F(CliTest, BadLogLevel) {
  EXPECT_INVALID(run_job(kValidJob, "--dry-run --log-level loud"),
                 "--log-level: expected trace, debug");
  EXPECT_INVALID(run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nlog_level: inof\n" +
                             kLastTrainCfg,
                         "--dry-run"),
                 "log_level: expected one of trace, debug, info, warn, error, got 'inof' (did you "
                 "mean 'info'?)");
}

TEST_F(CliTest, SetOnAnUnknownPath) {
  EXPECT_INVALID(run_job(kValidJob, "--dry-run --set train_cfg.max_epocs=3"),
                 "train_cfg.max_epocs: unknown key (did you mean 'max_epochs'?)");
  auto r = run_job(kValidJob, "--dry-run --set train_cfg.max_epocs=3");
  EXPECT_THAT(r.output, HasSubstr("--set"));
  EXPECT_INVALID(run_job(kValidJob, "--dry-run --set novalue"), "expected key.path=value");
}

TEST_F(CliTest, UnknownPluginKeyIsReportedByThePlugin) {
  EXPECT_INVALID(run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nstrategy: {type: "
                         "single, devce: cpu}\n" +
                             kLastTrainCfg,
                         "--dry-run"),
                 "strategy.devce: unknown key for strategy 'single' (did you mean 'device'?)");
  EXPECT_INVALID(run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nstrategy: {type: "
                         "single, device: tpu}\n" +
                             kLastTrainCfg,
                         "--dry-run"),
                 "strategy.device: expected auto, cpu, cuda or cuda:N, got 'tpu'");
}

TEST_F(CliTest, PluginNotFoundListsTheSearchPath) {
  auto r =
      run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nstrategy: {type: singel}\n" +
                  kLastTrainCfg,
              "--dry-run --plugin-path extra");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("job.yaml:2:18: strategy.type: no strategy plugin provides type 'singel' "
                        "(did you mean 'single'?)"));
  EXPECT_THAT(r.output, HasSubstr("--plugin-path " + (dir / "extra").string() + " (missing)"));
  EXPECT_THAT(r.output, HasSubstr("install " + fs::path(RH_PLUGIN_OUTPUT_DIR).string()));
}

TEST_F(CliTest, ExplicitPluginThatIsNotAPlugin) {
  EXPECT_INVALID(
      run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: x, plugin: " +
                  plugin("rh_test_not_a_plugin") + "}\n" + kLastTrainCfg,
              "--dry-run"),
      "does not export rh_plugin_info");
}

TEST_F(CliTest, ExplicitPluginWithWrongAbiMajor) {
  EXPECT_INVALID(run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: "
                         "wrong_major, plugin: " +
                             plugin("rh_test_wrong_major") + "}\n" + kLastTrainCfg,
                         "--dry-run"),
                 "hooks.0.plugin: cannot use plugin");
  auto r = run_job(
      "model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: wrong_major, "
      "plugin: " +
          plugin("rh_test_wrong_major") + "}\n" + kLastTrainCfg,
      "--dry-run");
  EXPECT_THAT(r.output, HasSubstr("ABI 2.0"));
}

TEST_F(CliTest, ExplicitPluginWithMismatchedNativeTag) {
  EXPECT_INVALID(run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: "
                         "native_mismatch, plugin: " +
                             plugin("rh_test_native_mismatch") + "}\n" + kLastTrainCfg,
                         "--dry-run"),
                 "native ABI tag mismatch: the plugin was built against torch 0.0.0-test");
}

TEST_F(CliTest, PluginInitError) {
  EXPECT_INVALID(run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: "
                         "init_error, plugin: " +
                             plugin("rh_test_init_error") + "}\n" + kLastTrainCfg,
                         "--dry-run"),
                 "Init failed: license server unreachable (test)");
}

TEST_F(CliTest, PluginCreateThrowingIsContainedAndTheHostExitsCleanly) {
  auto r = run_job(
      "model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: create_throws, "
      "plugin: " +
          plugin("rh_test_create_throws") + "}\n" + kLastTrainCfg,
      "--dry-run");
  EXPECT_EQ(r.signal, 0) << "the host crashed: " << r.output;
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("boom from create"));
}

TEST_F(CliTest, RelativePluginPathIsRelativeToTheJobFile) {
  fs::create_directories(dir / "jobs/plugins");
  fs::copy_file(plugin("rh_test_golden_v1"), dir / "jobs/plugins/libgolden.so");
  dir.write("jobs/job.yaml",
            "model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: golden_v1, "
            "plugin: plugins/libgolden.so}\n" +
                kLastTrainCfg);
  auto r = run("--config jobs/job.yaml --dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// ABI 1.3: a component learns the job file's directory, where its own
// relative paths start (as the host's do), whatever the current directory.
TEST_F(CliTest, ComponentsAreGivenTheJobFilesDirectory) {
  fs::create_directories(dir / "jobs/plugins");
  fs::create_directories(dir / "elsewhere");
  fs::copy_file(plugin("rh_test_helper_hook"), dir / "jobs/plugins/libhelper.so");
  dir.write("jobs/job.yaml",
            "model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: helper_hook, "
            "plugin: plugins/libhelper.so, log_dirs: true}\n" +
                kLastTrainCfg);
  auto r = rh::test::run_command("cd " + quote((dir / "elsewhere").string()) + " && " +
                                 quote(RH_RUNNER_HOST) + " --config ../jobs/job.yaml --dry-run");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("job_dir " + (dir / "jobs").string()));
}

TEST_F(CliTest, ListPluginsShowsEveryPluginAndRefusalsWithoutStopping) {
  fs::create_directories(dir / "extra");
  fs::copy_file(plugin("rh_test_helper_hook"), dir / "extra/librh_test_helper_hook.so");
  fs::copy_file(plugin("rh_test_wrong_major"), dir / "extra/librh_test_wrong_major.so");
  dir.write("extra/libbroken.so", "not a library");
  auto r = run("--list-plugins", "RH_PLUGIN_PATH=" + quote((dir / "extra").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("RH_PLUGIN_PATH  " + (dir / "extra").string()));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("hook +trace +records every lifecycle event"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("strategy +single "));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("strategy +helper_strategy"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("checkpoint_io +helper_io"));
  EXPECT_THAT(r.output, HasSubstr("plugin rh_hook_trace 0.1.0, " + kAbi + ", native tag none"));
  EXPECT_THAT(r.output,
              HasSubstr("plugin rh_strategy_single 0.1.0, " + kAbi + ", native tag torch "));
  EXPECT_THAT(
      r.output,
      HasSubstr("libbroken.so  [RH_PLUGIN_PATH]\n  REFUSED: cannot load the shared library"));
  EXPECT_THAT(
      r.output,
      HasSubstr(
          "librh_test_wrong_major.so  [RH_PLUGIN_PATH]\n  REFUSED: built for runner-host ABI 2.0"));
}

TEST_F(CliTest, ThePluginSearchNeverLooksInTheCurrentDirectory) {
  fs::copy_file(plugin("rh_test_golden_v1"), dir / "librh_test_golden_v1.so");
  auto r = run("--list-plugins", "RH_PLUGIN_PATH=:");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, Not(HasSubstr("golden_v1")));
}

// A plugin directory with a library whose constructor writes a marker file
// and two files that cannot load: a job that uses none of them opens none
// (no marker, no error); --list-plugins opens them all.
TEST_F(CliTest, AJobOpensOnlyThePluginsItUsesAndListPluginsOpensAll) {
  fs::create_directories(dir / "extra");
  fs::copy_file(plugin("rh_test_constructor_marker"), dir / "extra/librh_hook_marker.so");
  dir.write("extra/libbroken.so", "not a library");
  dir.write("extra/librh_hook_broken.so", "not a library either");
  const std::string marker_env = "RH_TEST_CONSTRUCTOR_MARKER=" + quote((dir / "marker").string());

  dir.write("job.yaml", kValidJob);  // strategy single, hook trace: from the install
  auto job = run("--config job.yaml --dry-run --plugin-path " + quote((dir / "extra").string()),
                 marker_env);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_FALSE(fs::exists(dir / "marker")) << "a library the job does not use was opened";
  EXPECT_THAT(job.output, Not(HasSubstr("broken")));

  auto list = run("--list-plugins --plugin-path " + quote((dir / "extra").string()), marker_env);
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_TRUE(fs::exists(dir / "marker")) << list.output;
  EXPECT_THAT(list.output, ::testing::ContainsRegex("hook +marker +writes a marker file"));
  EXPECT_THAT(list.output, HasSubstr("libbroken.so  [--plugin-path]\n  REFUSED: "));
  EXPECT_THAT(list.output, HasSubstr("librh_hook_broken.so  [--plugin-path]\n  REFUSED: "));

  // The job that uses it opens it, found by its file name.
  fs::remove(dir / "marker");
  auto used = run(
      "--config job.yaml --dry-run --plugin-path extra --set " + quote("hooks=[{type: marker}]"),
      marker_env);
  EXPECT_EQ(used.exit_code, 0) << used.output;
  EXPECT_TRUE(fs::exists(dir / "marker")) << used.output;
}

TEST_F(CliTest, ABrokenLibraryNamedForAUsedTypeIsAnErrorNamingTheFile) {
  fs::create_directories(dir / "extra");
  dir.write("extra/librh_hook_broken.so", "not a library");
  EXPECT_INVALID(
      run_job("model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: broken}\n" +
                  kLastTrainCfg,
              "--dry-run --plugin-path extra"),
      "job.yaml:3:12: hooks.0.type: hook 'broken': cannot use " +
          (dir / "extra/librh_hook_broken.so").string() +
          " (--plugin-path): cannot load the shared library");
}

TEST_F(CliTest, RelativePluginPathEntriesAreRelativeToTheJobFileAndLogged) {
  fs::create_directories(dir / "jobs/plugins");
  fs::create_directories(dir / "cwd");
  fs::copy_file(plugin("rh_test_golden_v1"), dir / "jobs/plugins/librh_hook_golden_v1.so");
  dir.write("jobs/job.yaml",
            "model: {type: mlp, in_features: 4, num_classes: 2}\nhooks:\n  - {type: golden_v1}\n" +
                kLastTrainCfg);
  // Run from cwd/: "." and "plugins" must mean jobs/ and jobs/plugins.
  auto r = run("--config ../jobs/job.yaml --dry-run --plugin-path plugins",
               "-C " + quote((dir / "cwd").string()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("plugin search directory " + (dir / "jobs/plugins").string() +
                                  " (--plugin-path entry 'plugins', relative to the job file's "
                                  "directory)"));
  auto env = run("--config ../jobs/job.yaml --dry-run",
                 "-C " + quote((dir / "cwd").string()) + " RH_PLUGIN_PATH=.:plugins");
  EXPECT_EQ(env.exit_code, 0) << env.output;
  EXPECT_THAT(env.output, HasSubstr("plugin search directory " + (dir / "jobs").string() +
                                    " (RH_PLUGIN_PATH entry '.', relative to the job file's "
                                    "directory)"));
}

TEST_F(CliTest, ListPluginsRefusesARelativeEntryWithoutAJobFile) {
  EXPECT_INVALID(run("--list-plugins --plugin-path ."),
                 "--plugin-path entry '.' is a relative directory and there is no job file to "
                 "resolve it against");
  EXPECT_INVALID(run("--list-plugins", "RH_PLUGIN_PATH=my_plugins"),
                 "RH_PLUGIN_PATH entry 'my_plugins' is a relative directory");
  // With a job file the same entry is resolved against its directory.
  dir.write("job.yaml", kValidJob);
  auto r = run("--list-plugins --config job.yaml --plugin-path .");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--plugin-path   " + dir.path().string() + "\n"));
}

// MMEngine's strategy names through the binary (issue 31, item 2): each is
// runner-host's strategy, said in one log line; ColossalAIStrategy is
// refused (exit 2) saying what to use instead; --list-plugins lists them.
// Before: "no strategy plugin provides type 'DDPStrategy'".
TEST_F(CliTest, MmenginesStrategyNamesAreRunnerHostsStrategies) {
  for (const auto& [name, type, keys] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"SingleDeviceStrategy", "single", ""},
           {"DDPStrategy", "ddp", ""},
           {"DeepSpeedStrategy", "zero", ", zero_optimization: {stage: 2}"},
           {"FSDPStrategy", "fsdp", ""}}) {
    std::string job = kValidJob;
    job.replace(job.find("{type: single}"), 14, "{type: " + name + keys + "}");
    auto r = run_job(job, "--dry-run");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output,
                HasSubstr("strategy type " + name + " (MMEngine's name) is runner-host's " + type));
    EXPECT_THAT(r.output, HasSubstr("dry run: the job is valid; strategy " + type + ","));
  }
  std::string colossal = kValidJob;
  colossal.replace(colossal.find("{type: single}"), 14, "{type: ColossalAIStrategy}");
  EXPECT_INVALID(run_job(colossal, "--dry-run"),
                 "job.yaml:3:18: strategy.type: strategy type 'ColossalAIStrategy': MMEngine's "
                 "ColossalAIStrategy trains through Colossal-AI");
  EXPECT_INVALID(run_job(colossal, "--dry-run"),
                 "runner-host has no Colossal-AI: use zero (ZeRO stages 1-3, MMEngine's "
                 "DeepSpeedStrategy) or fsdp (MMEngine's FSDPStrategy) instead");
  auto list = run("--list-plugins");
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, ::testing::ContainsRegex(
                               "strategy +DeepSpeedStrategy +-> zero \\(MMEngine's name\\)"));
  EXPECT_THAT(list.output, ::testing::ContainsRegex("strategy +ColossalAIStrategy +refused: "));
}

}  // namespace

namespace {

// Every ready job file in configs/ is valid (plugins, every key).
TEST(ConfigsTest, EveryShippedJobFileIsValid) {
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(RH_CONFIGS_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    auto r = rh::test::run_command("env -u RH_PLUGIN_PATH " + quote(RH_RUNNER_HOST) + " --config " +
                                   quote(entry.path().string()) + " --dry-run");
    EXPECT_EQ(r.exit_code, 0) << entry.path() << "\n" << r.output;
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

// The token-file example jobs run as their comments say: the files written by
// tools/data/text_to_tokens.py (numpy, nanoGPT's and Megatron-LM's layouts)
// beside a copy of configs/, a few steps, the loss going down.
TEST(ConfigsTest, TheTokenFileJobsTrainOnWhatTextToTokensWrites) {
  const fs::path source = fs::path(RH_CONFIGS_DIR).parent_path();
  rh::test::TempDir dir;
  fs::create_directories(dir / "configs");
  for (const auto& [job, flags] : {std::pair<std::string, std::string>{"gpt_token_bin", ""},
                                   {"llama_token_bin", ""},
                                   {"gpt_megatron", " --megatron"}}) {
    SCOPED_TRACE(job);
    fs::copy_file(source / "configs" / (job + ".yaml"), dir / "configs" / (job + ".yaml"));
    const std::string prefix = job == "gpt_megatron" ? "readme_megatron" : "readme";
    auto made = rh::test::run_command("/usr/bin/python3 " +
                                      quote((source / "tools/data/text_to_tokens.py").string()) +
                                      " " + quote((source / "README.md").string()) + " " +
                                      quote((dir / "work_dirs/tokens" / prefix).string()) + flags);
    ASSERT_EQ(made.exit_code, 0) << made.output;
    const fs::path work = dir / "work" / job;
    auto r = rh::test::run_command(
        quote(RH_RUNNER_HOST) + " --config " + quote((dir / "configs" / (job + ".yaml")).string()) +
        " --set train_cfg.max_iters=6 --set work_dir=" + quote(work.string()));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::vector<double> losses;
    std::ifstream metrics(work / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const auto at = line.find("\"loss\": ");
      if (at != std::string::npos) losses.push_back(std::stod(line.substr(at + 8)));
    }
    ASSERT_EQ(losses.size(), 6u) << r.output;
    EXPECT_LT(losses.back(), losses.front());
  }
}

}  // namespace
