// Loading, handshake and refusal rules of the plugin host (docs/architecture.md §2),
// exercised with the ABI test plugins of tests/sdk/test_plugins.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/version.h>

#include "abi/ComponentFactory.hpp"
#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginRegistry.hpp"
#include "abi/SearchPath.hpp"
#include "common/LogCapture.hpp"
#include "common/TestUtil.hpp"
#include "config/JobLoader.hpp"

namespace fs = std::filesystem;
using namespace rh::host;
using rh::test::LogCapture;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// This build's LibTorch, as the shipped plugins carry it (HostNativeTag.cpp;
// the header only: this binary links no LibTorch).
const NativeTag kHostTag{TORCH_VERSION, RH_TORCH_DEVICE, _GLIBCXX_USE_CXX11_ABI};

fs::path test_plugin(const std::string& name) {
  return fs::path(RH_TEST_PLUGIN_DIR) / ("lib" + name + ".so");
}

// The library of the constructor-marker plugin (tests/host/abi/constructor_marker.c).
fs::path marker_plugin() { return test_plugin("rh_test_constructor_marker"); }

// Points RH_TEST_CONSTRUCTOR_MARKER at `path` while it lives.
class MarkerEnv {
 public:
  explicit MarkerEnv(const fs::path& path) {
    setenv("RH_TEST_CONSTRUCTOR_MARKER", path.c_str(), 1);
  }
  ~MarkerEnv() { unsetenv("RH_TEST_CONSTRUCTOR_MARKER"); }
  MarkerEnv(const MarkerEnv&) = delete;
  MarkerEnv& operator=(const MarkerEnv&) = delete;
};

// Changes the current directory while it lives.
class CurrentDir {
 public:
  explicit CurrentDir(const fs::path& dir) : previous_(fs::current_path()) {
    fs::current_path(dir);
  }
  ~CurrentDir() { fs::current_path(previous_); }
  CurrentDir(const CurrentDir&) = delete;
  CurrentDir& operator=(const CurrentDir&) = delete;

 private:
  fs::path previous_;
};

// The message of the HostError `fn` throws, or "(no error)".
template <class Fn>
std::string host_error(Fn&& fn) {
  try {
    fn();
  } catch (const HostError& e) {
    return e.what();
  }
  return "(no error)";
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
  // Creates the strategy described by `yaml` (`strategy: <yaml>`).
  std::unique_ptr<StrategyInstance> create_strategy(const std::string& yaml) {
    fs::path job = dir.write("job.yaml", "model: {type: mlp}\nstrategy: " + yaml + "\n");
    job_ = rh::config::load_job(job.string(), {});
    ComponentFactory factory(registry, services, dir.path(), (dir / "work").string());
    factory.load_explicit_plugins(*job_.root);
    return factory.create_strategy(*job_.root->find("strategy"));
  }
  std::string create_strategy_error(const std::string& yaml) {
    try {
      create_strategy(yaml);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "(created)";
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
  EXPECT_THAT(msg, HasSubstr("torch " TORCH_VERSION " " RH_TORCH_DEVICE " cxx11abi=" +
                             std::to_string(_GLIBCXX_USE_CXX11_ABI)));
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
  EXPECT_EQ(registry.plugins()[0]->components.at(0).type_name, "golden_v1");
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

// The same from OnEvent, the call made at every event: the error names the
// hook and the entry.
TEST_F(PluginRegistryTest, ExceptionEscapingOnEventIsContained) {
  auto hook = create_hook("{type: event_throws, " + plugin_key("rh_test_create_throws") + "}");
  rh_RunState state{};
  rh_HookEventArgs args{RH_HOOK_EVENT_ARGS_STRUCT_SIZE,
                        RH_EVENT_AFTER_TRAIN_ITER,
                        &state,
                        nullptr,
                        0,
                        nullptr,
                        {"", 0}};
  const std::string msg = host_error([&] { hook->on_event(args); });
  EXPECT_THAT(msg, HasSubstr("hook 'event_throws'"));
  EXPECT_THAT(msg, HasSubstr("OnEvent let a C++ exception escape through the C ABI"));
  EXPECT_THAT(msg, HasSubstr("boom from on_event"));
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

TEST_F(PluginRegistryTest, UnknownTypeListsChoicesFromFileNamesWithoutOpeningAny) {
  registry.set_search_path({{fs::path(RH_PLUGIN_OUTPUT_DIR), "install"}});
  std::string msg = create_hook_error("{type: trac}");
  EXPECT_THAT(msg, HasSubstr("no hook plugin provides type 'trac' (did you mean 'trace'?)"));
  EXPECT_THAT(msg, HasSubstr("the search path finds a library by its file name, "
                             "librh_hook_trac.so (or name the library with plugin:)"));
  EXPECT_THAT(msg, HasSubstr("searched: install " + fs::path(RH_PLUGIN_OUTPUT_DIR).string()));
  EXPECT_TRUE(registry.plugins().empty()) << "a lookup by type opened a library it did not need";
}

TEST_F(PluginRegistryTest, FileNamesFollowTheShippedPlugins) {
  EXPECT_EQ(plugin_file_name(RH_COMPONENT_HOOK, "trace"), "librh_hook_trace.so");
  EXPECT_EQ(plugin_file_name(RH_COMPONENT_STRATEGY, "ddp"), "librh_strategy_ddp.so");
  EXPECT_EQ(plugin_file_name(RH_COMPONENT_CHECKPOINT_IO, "safetensors"),
            "librh_ckpt_io_safetensors.so");
  // Every shipped component is reachable under that name.
  registry.set_search_path({{fs::path(RH_PLUGIN_OUTPUT_DIR), "install"}});
  for (const auto& [kind, type] : std::vector<std::pair<rh_ComponentKind, std::string>>{
           {RH_COMPONENT_HOOK, "trace"},
           {RH_COMPONENT_HOOK, "logger"},
           {RH_COMPONENT_HOOK, "metrics"},
           {RH_COMPONENT_HOOK, "checkpoint"},
           {RH_COMPONENT_STRATEGY, "single"},
           {RH_COMPONENT_STRATEGY, "ddp"},
           {RH_COMPONENT_CHECKPOINT_IO, "safetensors"}})
    EXPECT_NE(registry.find(kind, type), nullptr) << kind_name(kind) << " " << type;
}

TEST_F(PluginRegistryTest, AJobOpensOnlyTheLibrariesOfTheTypesItUses) {
  MarkerEnv marker(dir / "marker.txt");
  fs::create_directories(dir / "plugins");
  fs::copy_file(marker_plugin(), dir / "plugins/librh_hook_marker.so");
  fs::copy_file(test_plugin("rh_test_golden_v1"), dir / "plugins/librh_hook_golden_v1.so");
  dir.write("plugins/libbroken.so", "not a library");
  dir.write("plugins/librh_hook_broken.so", "not a library either");
  registry.set_search_path({{dir / "plugins", "--plugin-path"}});

  auto hook = create_hook("{type: golden_v1}");
  EXPECT_FALSE(fs::exists(dir / "marker.txt")) << "the unused marker plugin was opened";
  ASSERT_EQ(registry.plugins().size(), 1u);
  EXPECT_EQ(registry.plugins()[0]->path, fs::canonical(dir / "plugins/librh_hook_golden_v1.so"));
  EXPECT_TRUE(registry.refused().empty());

  // Using it opens it.
  auto marker_hook = create_hook("{type: marker}");
  EXPECT_EQ(rh::test::read_file(dir / "marker.txt"), "constructor ran\n");
}

TEST_F(PluginRegistryTest, ScanForListPluginsOpensEveryLibrary) {
  MarkerEnv marker(dir / "marker.txt");
  fs::create_directories(dir / "plugins");
  fs::copy_file(marker_plugin(), dir / "plugins/librh_hook_marker.so");
  dir.write("plugins/librh_hook_broken.so", "not a library");
  registry.scan({{dir / "plugins", "--plugin-path"}});
  EXPECT_EQ(rh::test::read_file(dir / "marker.txt"), "constructor ran\n");
  ASSERT_EQ(registry.plugins().size(), 1u);
  ASSERT_EQ(registry.refused().size(), 1u);
  EXPECT_THAT(registry.refused()[0].reason, HasSubstr("cannot load the shared library"));
}

TEST_F(PluginRegistryTest, ALibraryNamedForATypeThatCannotLoadIsAnErrorNamingTheFile) {
  fs::create_directories(dir / "plugins");
  dir.write("plugins/librh_hook_broken.so", "not a library");
  registry.set_search_path({{dir / "plugins", "--plugin-path"}});
  std::string msg = create_hook_error("{type: broken}");
  EXPECT_THAT(msg, HasSubstr("job.yaml:3:"));
  EXPECT_THAT(msg, HasSubstr("hooks.0.type: hook 'broken': cannot use " +
                             (dir / "plugins/librh_hook_broken.so").string() +
                             " (--plugin-path): cannot load the shared library"));
}

TEST_F(PluginRegistryTest, ALibraryNamedForATypeMustProvideIt) {
  fs::create_directories(dir / "plugins");
  fs::copy_file(test_plugin("rh_test_golden_v1"), dir / "plugins/librh_hook_marker.so");
  registry.set_search_path({{dir / "plugins", "RH_PLUGIN_PATH"}});
  EXPECT_THAT(host_error([&] { registry.find(RH_COMPONENT_HOOK, "marker"); }),
              HasSubstr((dir / "plugins/librh_hook_marker.so").string() +
                        " (RH_PLUGIN_PATH) is named for hook 'marker' but provides no hook "
                        "'marker' (it provides hook 'golden_v1')"));
  // The same through the factory: a config error at the type.
  EXPECT_THAT(create_hook_error("{type: marker}"), HasSubstr("hooks.0.type: "));
}

TEST_F(PluginRegistryTest, ATypeThatCannotBeAFileNameIsRefused) {
  registry.set_search_path({{dir.path(), "--plugin-path"}});
  EXPECT_THAT(host_error([&] { registry.find(RH_COMPONENT_HOOK, "../plugins/x"); }),
              HasSubstr("hook '../plugins/x': not a valid type name"));
}

TEST_F(PluginRegistryTest, TheFirstInSearchOrderWinsAndTheShadowedOneIsNamedOnce) {
  MarkerEnv marker(dir / "marker.txt");
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  fs::copy_file(marker_plugin(), dir / "a/librh_hook_marker.so");
  fs::copy_file(marker_plugin(), dir / "b/librh_hook_marker.so");
  registry.set_search_path({{dir / "a", "--plugin-path"}, {dir / "b", "RH_PLUGIN_PATH"}});
  LogCapture log;
  const Component* c = registry.find(RH_COMPONENT_HOOK, "marker");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->plugin->path, fs::canonical(dir / "a/librh_hook_marker.so"));
  EXPECT_EQ(registry.plugins().size(), 1u) << "the shadowed library was opened";
  EXPECT_EQ(rh::test::read_file(dir / "marker.txt"), "constructor ran\n");
  const std::string warning =
      "[warning] hook 'marker' is provided by " + (dir / "a/librh_hook_marker.so").string() +
      " (--plugin-path) and by " + (dir / "b/librh_hook_marker.so").string() +
      " (RH_PLUGIN_PATH), not loaded: using the first in search order";
  EXPECT_THAT(log.text(), HasSubstr(warning));
  registry.find(RH_COMPONENT_HOOK, "marker");
  EXPECT_EQ(log.text().find(warning), log.text().rfind(warning)) << "warned twice:\n" << log.text();
}

TEST_F(PluginRegistryTest, TheSameDirectoryTwiceOnThePathIsNoDuplicate) {
  fs::create_directories(dir / "a");
  fs::copy_file(marker_plugin(), dir / "a/librh_hook_marker.so");
  registry.set_search_path({{dir / "a", "--plugin-path"}, {dir / "a/.", "RH_PLUGIN_PATH"}});
  LogCapture log;
  ASSERT_NE(registry.find(RH_COMPONENT_HOOK, "marker"), nullptr);
  EXPECT_THAT(log.text(), Not(HasSubstr("is provided by")));
}

TEST_F(PluginRegistryTest, AnExplicitPluginBeatsTheSearchPathWhateverTheJobOrder) {
  fs::create_directories(dir / "plugins");
  fs::copy_file(test_plugin("rh_test_golden_v1"), dir / "plugins/librh_hook_golden_v1.so");
  registry.set_search_path({{dir / "plugins", "install"}});
  // The component without plugin: comes first in the job.
  fs::path job =
      dir.write("job.yaml", "model: {type: mlp}\nhooks:\n  - {type: golden_v1}\n  - " +
                                ("{type: golden_v1, " + plugin_key("rh_test_golden_v1")) + "}\n");
  job_ = rh::config::load_job(job.string(), {});
  ComponentFactory factory(registry, services, dir.path(), (dir / "work").string());
  LogCapture log;
  factory.load_explicit_plugins(*job_.root);
  const auto& items = job_.root->find("hooks")->seq_items();
  auto plain = factory.create_hook(*items.at(0));
  auto named = factory.create_hook(*items.at(1));
  const std::string explicit_path = fs::canonical(test_plugin("rh_test_golden_v1")).string();
  EXPECT_THAT(plain->what(), HasSubstr(explicit_path));
  EXPECT_THAT(named->what(), HasSubstr(explicit_path));
  EXPECT_EQ(registry.plugins().size(), 1u) << "the search path's copy was opened";
  EXPECT_THAT(log.text(),
              HasSubstr("[warning] hook 'golden_v1' is provided by " + explicit_path +
                        " (plugin:) and by " + (dir / "plugins/librh_hook_golden_v1.so").string() +
                        " (install): a component naming a library with plugin: uses "
                        "that one; `type: golden_v1` alone gets the first, named by "
                        "plugin: in the job"));
}

TEST_F(PluginRegistryTest, ListingWarnsAboutATypeSeveralLibrariesProvide) {
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  fs::copy_file(test_plugin("rh_test_golden_v1"), dir / "a/librh_test_golden_v1.so");
  fs::copy_file(test_plugin("rh_test_golden_v1"), dir / "b/librh_hook_golden_v1.so");
  LogCapture log;
  registry.scan({{dir / "a", "--plugin-path"}, {dir / "b", "install"}});
  EXPECT_EQ(registry.plugins().size(), 2u);
  EXPECT_THAT(log.text(),
              HasSubstr("[warning] hook 'golden_v1' is provided by " +
                        (dir / "a/librh_test_golden_v1.so").string() + " (--plugin-path) and by " +
                        (dir / "b/librh_hook_golden_v1.so").string() +
                        " (install): a job's `type: golden_v1` gets " +
                        (dir / "b/librh_hook_golden_v1.so").string() +
                        " (install), the first librh_hook_golden_v1.so in search order"));
}

TEST_F(PluginRegistryTest, RelativeSearchPathEntryResolvesAgainstTheJobFileNotTheCwd) {
  // The job and its plugins live in jobs/; the host runs from elsewhere/,
  // which holds a decoy that must not be found.
  MarkerEnv marker(dir / "marker.txt");
  fs::create_directories(dir / "jobs/plugins");
  fs::create_directories(dir / "elsewhere");
  fs::copy_file(marker_plugin(), dir / "jobs/librh_hook_marker.so");
  fs::copy_file(test_plugin("rh_test_golden_v1"), dir / "elsewhere/librh_hook_marker.so");
  CurrentDir cwd(dir / "elsewhere");
  LogCapture log;
  auto dirs = plugin_search_dirs({"."}, "plugins:/abs/dir", "", dir / "jobs");
  ASSERT_EQ(dirs.size(), 3u);
  EXPECT_EQ(dirs[0].dir, dir / "jobs");
  EXPECT_EQ(dirs[0].origin, "--plugin-path");
  EXPECT_EQ(dirs[1].dir, dir / "jobs/plugins");
  EXPECT_EQ(dirs[1].origin, "RH_PLUGIN_PATH");
  EXPECT_EQ(dirs[2].dir, "/abs/dir");
  EXPECT_THAT(log.text(), HasSubstr("[info] plugin search directory " + (dir / "jobs").string() +
                                    " (--plugin-path entry '.', relative to the job file's "
                                    "directory)"));
  EXPECT_THAT(log.text(),
              HasSubstr("[info] plugin search directory " + (dir / "jobs/plugins").string() +
                        " (RH_PLUGIN_PATH entry 'plugins', relative to the job file's directory)"));
  registry.set_search_path(dirs);
  const Component* c = registry.find(RH_COMPONENT_HOOK, "marker");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->plugin->path, fs::canonical(dir / "jobs/librh_hook_marker.so"));
}

// MMEngine's strategy names (issue 31, item 2): a type no plugin provides
// that is MMEngine's name for one of runner-host's is that type, said in
// one log line; the instance is runner-host's (its type, checkpoints).
// Before: "no strategy plugin provides type 'DDPStrategy'".
TEST_F(PluginRegistryTest, MmenginesStrategyNamesAreRunnerHostsTypes) {
  registry.set_search_path({{fs::path(RH_PLUGIN_OUTPUT_DIR), "install"}});
  for (const auto& [name, type] : std::vector<std::pair<std::string, std::string>>{
           {"SingleDeviceStrategy", "single"}, {"DDPStrategy", "ddp"}}) {
    LogCapture log;
    auto strategy = create_strategy("{type: " + name + "}");
    EXPECT_EQ(strategy->type(), type);
    EXPECT_THAT(strategy->what(), HasSubstr("librh_strategy_" + type + ".so"));
    EXPECT_THAT(log.text(), HasSubstr("[info] strategy type " + name +
                                      " (MMEngine's name) is runner-host's " + type));
  }
  // A misspelt one gets the alias suggested, and the error lists them.
  const std::string msg = create_strategy_error("{type: DDPStrategie}");
  EXPECT_THAT(msg, HasSubstr("no strategy plugin provides type 'DDPStrategie' (did you mean "
                             "'DDPStrategy'?)"));
  EXPECT_THAT(msg, HasSubstr("; MMEngine's strategy names: SingleDeviceStrategy (single), "
                             "DDPStrategy (ddp), DeepSpeedStrategy (zero), FSDPStrategy (fsdp), "
                             "ColossalAIStrategy (refused);"));
  // An alias whose type no plugin provides says both names.
  registry.set_search_path({{dir / "nothing", "install"}});
  const std::string absent = create_strategy_error("{type: DeepSpeedStrategy}");
  EXPECT_THAT(absent,
              HasSubstr("strategy.type: no strategy plugin provides type 'zero' (the type of "
                        "DeepSpeedStrategy, MMEngine's name for it); available: "));
  // zero is shipped: the message says how to build it (tools/quickstart.sh
  // builds only the quickstart's plugins); a type nobody ships is not told so.
  EXPECT_THAT(absent, HasSubstr("; librh_strategy_zero.so is a plugin runner-host ships but was "
                                "not built here (tools/quickstart.sh builds only those "
                                "configs/quickstart.yaml loads): tools/build.sh builds them all"));
  EXPECT_THAT(create_strategy_error("{type: megatron}"), Not(HasSubstr("runner-host ships")));
}

TEST_F(PluginRegistryTest, ColossalAiStrategyIsRefusedSayingWhatToUseInstead) {
  registry.set_search_path({{fs::path(RH_PLUGIN_OUTPUT_DIR), "install"}});
  EXPECT_EQ(create_strategy_error("{type: ColossalAIStrategy}"),
            (dir / "job.yaml").string() +
                ":2:18: strategy.type: strategy type 'ColossalAIStrategy': MMEngine's "
                "ColossalAIStrategy trains through Colossal-AI (its Gemini and low-level ZeRO, "
                "heterogeneous memory, hybrid parallelism); runner-host has no Colossal-AI: use "
                "zero (ZeRO stages 1-3, MMEngine's DeepSpeedStrategy) or fsdp (MMEngine's "
                "FSDPStrategy) instead");
}

// A plugin that provides a type of an alias's very name wins: on the search
// path under that name, or named with plugin:. The log says so.
TEST_F(PluginRegistryTest, APluginProvidingAnAliasesNameWinsOverTheAlias) {
  fs::create_directories(dir / "plugins");
  fs::copy_file(test_plugin("rh_test_alias_named_strategy"),
                dir / "plugins/librh_strategy_DeepSpeedStrategy.so");
  registry.set_search_path(
      {{dir / "plugins", "--plugin-path"}, {fs::path(RH_PLUGIN_OUTPUT_DIR), "install"}});
  LogCapture log;
  auto strategy = create_strategy("{type: DeepSpeedStrategy}");
  EXPECT_EQ(strategy->type(), "DeepSpeedStrategy");
  const std::string path = fs::canonical(dir / "plugins/librh_strategy_DeepSpeedStrategy.so");
  EXPECT_THAT(strategy->what(), HasSubstr(path));
  EXPECT_THAT(log.text(), HasSubstr("[info] strategy type DeepSpeedStrategy: " + path +
                                    " provides it, so it is that plugin's, not MMEngine's name "
                                    "for runner-host's zero"));
  EXPECT_THAT(log.text(), Not(HasSubstr("is runner-host's zero")));
  auto named = create_strategy("{type: DeepSpeedStrategy, " +
                               plugin_key("rh_test_alias_named_strategy") + "}");
  EXPECT_EQ(named->type(), "DeepSpeedStrategy");
  EXPECT_THAT(named->what(), HasSubstr(fs::canonical(test_plugin("rh_test_alias_named_strategy"))));
}

TEST(SearchPathTest, RelativeEntryWithoutAJobFileIsRefused) {
  EXPECT_THAT(host_error([] {
                plugin_search_dirs({"/abs", "."}, nullptr, "", std::nullopt);
              }),
              HasSubstr("--plugin-path entry '.' is a relative directory and there is no job file "
                        "to resolve it against"));
  EXPECT_THAT(
      host_error([] { plugin_search_dirs({}, "/abs:my/plugins", "", std::nullopt); }),
      HasSubstr("RH_PLUGIN_PATH entry 'my/plugins' is a relative directory and there is no job "
                "file to resolve it against (relative plugin directories are relative to the job "
                "file's directory, never the current directory): give an absolute path"));
  // Absolute entries need no job file.
  EXPECT_EQ(plugin_search_dirs({"/abs"}, "/env", "", std::nullopt).size(), 2u);
}

TEST(SearchPathTest, OrderIsCliThenEnvThenInstallAndEmptyEntriesAreSkipped) {
  auto dirs = plugin_search_dirs({"/a", ""}, "/b::/c:", "/opt/rh/bin/runner-host", std::nullopt);
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
