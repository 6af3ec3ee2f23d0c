// Loading, handshake and refusal rules of the plugin host (DESIGN.md §2),
// exercised with the ABI test plugins of tests/abi/plugins.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/TestUtil.hpp"
#include "config/JobLoader.hpp"
#include "plugins/ComponentFactory.hpp"
#include "plugins/HostApi.hpp"
#include "plugins/HostError.hpp"
#include "plugins/PluginRegistry.hpp"
#include "plugins/SearchPath.hpp"

namespace fs = std::filesystem;
using namespace rh::host;
using ::testing::HasSubstr;

namespace {

const NativeTag kHostTag{"1.13.0", "cpu", 1};

fs::path test_plugin(const std::string& name) {
  return fs::path(RH_TEST_PLUGIN_DIR) / ("lib" + name + ".so");
}

// The message of the refusal load() throws.
std::string refusal(PluginRegistry& registry, const std::string& name) {
  try {
    registry.load(test_plugin(name), "test");
  } catch (const HostError& e) {
    return e.what();
  }
  return "(loaded)";
}

class PluginRegistryTest : public ::testing::Test {
 protected:
  HostServices services;
  PluginRegistry registry{kHostTag, services};
  rh::test::TempDir dir;

  // Creates the hook described by `yaml` (one hook map, `hooks: [<yaml>]`).
  std::unique_ptr<HookInstance> create_hook(const std::string& yaml) {
    fs::path job = dir.write("job.yaml", "model: {type: mlp}\nhooks:\n  - " + yaml + "\n");
    job_ = rh::config::load_job(job.string(), {});
    ComponentFactory factory(registry, services, dir.path(), (dir / "work").string());
    return factory.create_hook(*job_.root->find("hooks")->seq_items().at(0));
  }
  std::string create_hook_error(const std::string& yaml) {
    try {
      create_hook(yaml);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(created)";
  }
  std::string plugin_key(const std::string& name) {
    return "plugin: " + test_plugin(name).string();
  }

  rh::config::Job job_;
};

TEST_F(PluginRegistryTest, GoldenV1PluginBuiltAgainstFrozenHeadersLoadsAndRuns) {
  Plugin& p = registry.load(test_plugin("rh_test_golden_v1"), "test");
  EXPECT_EQ(p.abi_major, 1u);
  EXPECT_EQ(p.abi_minor, 0u);
  ASSERT_NE(registry.find(RH_COMPONENT_HOOK, "golden_v1"), nullptr);
  auto hook = create_hook("{type: golden_v1, label: x}");
  rh_RunState state = services.run_state();
  rh_HookEventArgs ev{
      RH_HOOK_EVENT_ARGS_STRUCT_SIZE, RH_EVENT_BEFORE_RUN, &state, nullptr, 0, nullptr, {"", 0}};
  EXPECT_NO_THROW(hook->on_event(ev));
}

TEST_F(PluginRegistryTest, SmallerPluginInfoHidesInitAndShutdown) {
  // The plugin's Init/Shutdown fields hold abort(); they lie past its struct_size.
  Plugin& p = registry.load(test_plugin("rh_test_small_struct"), "test");
  EXPECT_EQ(p.init, nullptr);
  EXPECT_EQ(p.shutdown, nullptr);
  EXPECT_NO_THROW(registry.initialize(p));
  EXPECT_NO_THROW(create_hook("{type: small_struct}"));
}

TEST_F(PluginRegistryTest, LargerStructsFromANewerMinorLoad) {
  Plugin& p = registry.load(test_plugin("rh_test_large_struct"), "test");
  EXPECT_EQ(p.abi_minor, RH_ABI_VERSION_MINOR + 1u);
  auto hook = create_hook("{type: large_struct}");
  rh_RunState state = services.run_state();
  rh_HookEventArgs ev{
      RH_HOOK_EVENT_ARGS_STRUCT_SIZE, RH_EVENT_AFTER_RUN, &state, nullptr, 0, nullptr, {"", 0}};
  EXPECT_NO_THROW(hook->on_event(ev));
}

TEST_F(PluginRegistryTest, NullOptionalEntriesGetTheDefaults) {
  auto hook = create_hook("{type: null_entries, " + plugin_key("rh_test_null_entries") + "}");
  EXPECT_EQ(hook->priority(), RH_PRIORITY_NORMAL);
  EXPECT_TRUE(hook->wants(RH_EVENT_AFTER_LOAD_CHECKPOINT));
  EXPECT_TRUE(hook->wants(RH_EVENT_BEFORE_RUN));
}

TEST_F(PluginRegistryTest, NullRequiredEntryIsRefused) {
  EXPECT_THAT(refusal(registry, "rh_test_null_required"),
              HasSubstr("hook 'null_required': required vtable entry OnEvent is NULL"));
}

TEST_F(PluginRegistryTest, WrongAbiMajorIsRefused) {
  EXPECT_THAT(refusal(registry, "rh_test_wrong_major"),
              HasSubstr("built for runner-host ABI 2.0 but this host speaks ABI 1." +
                        std::to_string(RH_ABI_VERSION_MINOR)));
}

TEST_F(PluginRegistryTest, NativeTagMismatchNamesBothTags) {
  std::string msg = refusal(registry, "rh_test_native_mismatch");
  EXPECT_THAT(msg, HasSubstr("native ABI tag mismatch"));
  EXPECT_THAT(msg, HasSubstr("torch 0.0.0-test cpu cxx11abi=1"));
  EXPECT_THAT(msg, HasSubstr("torch 1.13.0 cpu cxx11abi=1"));
}

TEST_F(PluginRegistryTest, NullInfoIsRefused) {
  EXPECT_THAT(refusal(registry, "rh_test_null_info"), HasSubstr("rh_plugin_info() returned NULL"));
}

TEST_F(PluginRegistryTest, LibraryWithoutEntryPointIsRefused) {
  EXPECT_THAT(refusal(registry, "rh_test_not_a_plugin"),
              HasSubstr("not a runner-host plugin: it does not export rh_plugin_info"));
}

TEST_F(PluginRegistryTest, FileThatIsNotASharedLibraryIsRefused) {
  fs::path junk = dir.write("libjunk.so", "this is not an ELF file\n");
  try {
    registry.load(junk, "test");
    FAIL() << "loaded a text file";
  } catch (const HostError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot load the shared library"));
    EXPECT_THAT(e.what(), HasSubstr("libjunk.so"));  // dlerror names the file
  }
}

TEST_F(PluginRegistryTest, ScanRecordsRefusalsAndKeepsTheOthers) {
  fs::create_directories(dir / "plugins");
  fs::copy_file(test_plugin("rh_test_golden_v1"), dir / "plugins/librh_test_golden_v1.so");
  fs::copy_file(test_plugin("rh_test_wrong_major"), dir / "plugins/librh_test_wrong_major.so");
  dir.write("plugins/libbroken.so", "garbage");
  dir.write("plugins/README.txt", "not a library: ignored");
  registry.scan({{dir / "plugins", "--plugin-path"}, {dir / "missing", "RH_PLUGIN_PATH"}});
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_NE(registry.find(RH_COMPONENT_HOOK, "golden_v1"), nullptr);
  ASSERT_EQ(registry.refused().size(), 2u);
  EXPECT_EQ(registry.refused()[0].path.filename(), "libbroken.so");
  EXPECT_THAT(registry.refused()[1].reason, HasSubstr("ABI 2.0"));
  EXPECT_EQ(registry.searched().size(), 2u);
}

TEST_F(PluginRegistryTest, LoadingTheSameFileTwiceReturnsTheFirstLoad) {
  Plugin& a = registry.load(test_plugin("rh_test_golden_v1"), "test");
  Plugin& b = registry.load(test_plugin("rh_test_golden_v1"), "again");
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(registry.plugins().size(), 1u);
}

TEST_F(PluginRegistryTest, InitErrorIsReportedWithThePluginPath) {
  std::string msg =
      create_hook_error("{type: init_error, " + plugin_key("rh_test_init_error") + "}");
  EXPECT_THAT(msg, HasSubstr("Init failed: license server unreachable (test)"));
  EXPECT_THAT(msg, HasSubstr("librh_test_init_error.so"));
}

TEST_F(PluginRegistryTest, ExceptionEscapingCreateIsContained) {
  std::string msg =
      create_hook_error("{type: create_throws, " + plugin_key("rh_test_create_throws") + "}");
  EXPECT_THAT(msg, HasSubstr("let a C++ exception escape through the C ABI"));
  EXPECT_THAT(msg, HasSubstr("boom from create"));
}

TEST_F(PluginRegistryTest, HelperTrampolineTurnsExceptionsIntoErrors) {
  std::string msg = create_hook_error("{type: helper_hook, fail: true, " +
                                      plugin_key("rh_test_helper_hook") + "}");
  EXPECT_THAT(msg, HasSubstr("Create failed: HelperHook asked to fail"));
  EXPECT_THAT(msg, ::testing::Not(HasSubstr("escape")));
}

TEST_F(PluginRegistryTest, PluginConfigErrorsNameFileLineAndKeyPath) {
  std::string msg = create_hook_error("{type: helper_hook, threshold: -1, " +
                                      plugin_key("rh_test_helper_hook") + "}");
  EXPECT_THAT(msg, HasSubstr("job.yaml:3:"));
  EXPECT_THAT(msg, HasSubstr("hooks.0.threshold: must be >= 0"));
}

TEST_F(PluginRegistryTest, KeysThePluginNeverReadAreUnknown) {
  std::string msg = create_hook_error("{type: helper_hook, treshold: 2, " +
                                      plugin_key("rh_test_helper_hook") + "}");
  EXPECT_THAT(msg, HasSubstr("hooks.0.treshold"));
  EXPECT_THAT(msg, HasSubstr("did you mean 'threshold'?"));
}

TEST_F(PluginRegistryTest, HookMaskAndPriorityComeFromThePluginUnlessOverridden) {
  auto hook = create_hook("{type: helper_hook, " + plugin_key("rh_test_helper_hook") + "}");
  EXPECT_EQ(hook->priority(), 30);
  EXPECT_TRUE(hook->wants(RH_EVENT_BEFORE_RUN));
  EXPECT_FALSE(hook->wants(RH_EVENT_AFTER_TRAIN_ITER));
  auto low =
      create_hook("{type: helper_hook, priority: LOW, " + plugin_key("rh_test_helper_hook") + "}");
  EXPECT_EQ(low->priority(), RH_PRIORITY_LOW);
  auto num =
      create_hook("{type: helper_hook, priority: 5, " + plugin_key("rh_test_helper_hook") + "}");
  EXPECT_EQ(num->priority(), 5);
}

TEST_F(PluginRegistryTest, ExplicitPluginMustProvideTheType) {
  std::string msg = create_hook_error("{type: nope, " + plugin_key("rh_test_helper_hook") + "}");
  EXPECT_THAT(msg, HasSubstr("provides no hook 'nope'"));
  EXPECT_THAT(msg, HasSubstr("hook 'helper_hook'"));
  EXPECT_THAT(msg, HasSubstr("strategy 'helper_strategy'"));
}

TEST_F(PluginRegistryTest, UnknownTypeListsChoicesAndSearchPath) {
  registry.scan({{fs::path(RH_PLUGIN_OUTPUT_DIR), "install"}});
  std::string msg = create_hook_error("{type: trac}");
  EXPECT_THAT(msg, HasSubstr("no hook plugin provides type 'trac' (did you mean 'trace'?)"));
  EXPECT_THAT(msg, HasSubstr("searched: install " + fs::path(RH_PLUGIN_OUTPUT_DIR).string()));
}

TEST(SearchPathTest, OrderIsCliThenEnvThenInstallAndEmptyEntriesAreSkipped) {
  auto dirs = plugin_search_dirs({"/a", ""}, "/b::/c:", "/opt/rh/bin/runner-host");
  ASSERT_EQ(dirs.size(), 4u);
  EXPECT_EQ(dirs[0].dir, "/a");
  EXPECT_EQ(dirs[0].origin, "--plugin-path");
  EXPECT_EQ(dirs[1].dir, "/b");
  EXPECT_EQ(dirs[2].dir, "/c");
  EXPECT_EQ(dirs[2].origin, "RH_PLUGIN_PATH");
  EXPECT_EQ(dirs[3].dir, fs::path("/opt/rh") / RH_PLUGIN_INSTALL_RELDIR);
  EXPECT_EQ(dirs[3].origin, "install");
  for (const auto& d : dirs) EXPECT_NE(d.dir, fs::current_path());
}

}  // namespace
