// TestPluginsTest.cpp — the ABI test plugins (tests/sdk/test_plugins) describe
// themselves as their comments say, before any host loads them: each one
// bends exactly the rule it is meant to bend and is otherwise a working hook.
// What the real host must do with each is tested in tests/plugins.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "common/FakeHost.hpp"

namespace rh::test {
namespace {

LoadedPlugin open_test_plugin(const std::string& name) {
  return LoadedPlugin::open(std::string(RH_TEST_PLUGIN_DIR) + "/lib" + name + ".so");
}

// Creates the hook of `component`, sends it two events, destroys it.
void expect_working_hook(FakeHost& host, const rh_Component& component) {
  ASSERT_EQ(component.kind, RH_COMPONENT_HOOK);
  const auto* vtable = static_cast<const rh_HookVtable*>(component.vtable);
  ASSERT_GE(vtable->struct_size, RH_HOOK_VTABLE_STRUCT_SIZE);
  host.config({{"label", "x"}});
  rh_CreateArgs args = host.create_args(view(component.type_name), "/tmp");
  rh_HookInstance* instance = nullptr;
  ASSERT_EQ(FakeHost::take(vtable->Create(&args, &instance)).first, RH_ERROR_OK);
  ASSERT_NE(instance, nullptr);
  EXPECT_EQ(host.lookups().count("hooks.0.label"), 1u);
  EventBuilder events;
  rh_HookEventArgs event = events.args(RH_EVENT_BEFORE_RUN);
  EXPECT_EQ(FakeHost::take(vtable->OnEvent(instance, &event)).first, RH_ERROR_OK);
  event = events.args(RH_EVENT_AFTER_RUN);
  EXPECT_EQ(FakeHost::take(vtable->OnEvent(instance, &event)).first, RH_ERROR_OK);
  if (vtable->Destroy != nullptr) vtable->Destroy(instance);
}

TEST(TestPluginsTest, GoldenV1IsAnAbi10Plugin) {
  FakeHost host;
  LoadedPlugin plugin = open_test_plugin("rh_test_golden_v1");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_major, 1u);
  EXPECT_EQ(info->abi_minor, 0u);
  EXPECT_EQ(info->struct_size, 128u);  // rh_PluginInfo of ABI 1.0
  ASSERT_EQ(info->num_components, 1u);
  EXPECT_EQ(view(info->components[0].type_name), "golden_v1");
  expect_working_hook(host, info->components[0]);
}

TEST(TestPluginsTest, SmallStructEndsBeforeInit) {
  FakeHost host;
  LoadedPlugin plugin = open_test_plugin("rh_test_small_struct");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->struct_size, offsetof(rh_PluginInfo, Init));
  EXPECT_FALSE(RH_STRUCT_HAS(info, rh_PluginInfo, Init));
  EXPECT_NE(info->Init, nullptr);  // present in memory, absent by struct_size (aborts)
  ASSERT_EQ(info->num_components, 1u);
  EXPECT_EQ(view(info->components[0].type_name), "small_struct");
  EXPECT_EQ(static_cast<const rh_HookVtable*>(info->components[0].vtable)->struct_size,
            RH_HOOK_VTABLE_STRUCT_SIZE);
  expect_working_hook(host, info->components[0]);
}

TEST(TestPluginsTest, LargeStructIsFromANewerMinor) {
  FakeHost host;
  LoadedPlugin plugin = open_test_plugin("rh_test_large_struct");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_minor, RH_ABI_VERSION_MINOR + 1u);
  EXPECT_GT(info->struct_size, RH_PLUGIN_INFO_STRUCT_SIZE);
  ASSERT_EQ(info->num_components, 2u);
  EXPECT_GT(info->components[0].struct_size, RH_COMPONENT_STRUCT_SIZE);
  EXPECT_EQ(view(plugin.component(0)->type_name), "large_struct");
  EXPECT_EQ(view(plugin.component(1)->type_name), "large_struct_second");
  EXPECT_GT(static_cast<const rh_HookVtable*>(plugin.component(0)->vtable)->struct_size,
            RH_HOOK_VTABLE_STRUCT_SIZE);
  expect_working_hook(host, *plugin.component(0));
  expect_working_hook(host, *plugin.component(1));
}

TEST(TestPluginsTest, NullEntriesHasOnlyTheRequiredEntries) {
  FakeHost host;
  LoadedPlugin plugin = open_test_plugin("rh_test_null_entries");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->Init, nullptr);
  EXPECT_EQ(info->Shutdown, nullptr);
  const auto* vtable = static_cast<const rh_HookVtable*>(info->components[0].vtable);
  EXPECT_EQ(view(info->components[0].type_name), "null_entries");
  EXPECT_EQ(vtable->Destroy, nullptr);
  EXPECT_EQ(vtable->EventMask, nullptr);
  EXPECT_EQ(vtable->Priority, nullptr);
  EXPECT_NE(vtable->Create, nullptr);
  EXPECT_NE(vtable->OnEvent, nullptr);
  expect_working_hook(host, info->components[0]);
  expect_working_hook(host, info->components[0]);
}

TEST(TestPluginsTest, NullRequiredLacksOnEvent) {
  LoadedPlugin plugin = open_test_plugin("rh_test_null_required");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(view(info->components[0].type_name), "null_required");
  EXPECT_EQ(static_cast<const rh_HookVtable*>(info->components[0].vtable)->OnEvent, nullptr);
}

TEST(TestPluginsTest, WrongMajor) {
  LoadedPlugin plugin = open_test_plugin("rh_test_wrong_major");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_major, RH_ABI_VERSION_MAJOR + 1u);
  EXPECT_EQ(view(info->components[0].type_name), "wrong_major");
}

TEST(TestPluginsTest, NativeMismatch) {
  LoadedPlugin plugin = open_test_plugin("rh_test_native_mismatch");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(view(info->native_tag.torch_version), "0.0.0-test");
  EXPECT_EQ(view(info->native_tag.device), "cpu");
  EXPECT_EQ(info->native_tag.cxx11_abi, 1);
  EXPECT_EQ(view(info->components[0].type_name), "native_mismatch");
}

TEST(TestPluginsTest, InitError) {
  FakeHost host;
  LoadedPlugin plugin = open_test_plugin("rh_test_init_error");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  ASSERT_NE(info->Init, nullptr);
  rh_InitArgs args{RH_INIT_ARGS_STRUCT_SIZE, host.api(), host.context()};
  auto [code, message] = FakeHost::take(info->Init(&args));
  EXPECT_EQ(code, RH_ERROR_FAILED_PRECONDITION);
  EXPECT_EQ(message, "license server unreachable (test)");
  EXPECT_EQ(view(info->components[0].type_name), "init_error");
}

// What the host must contain: the exception really crosses the C boundary.
TEST(TestPluginsTest, CreateThrowsAcrossTheBoundary) {
  FakeHost host;
  LoadedPlugin plugin = open_test_plugin("rh_test_create_throws");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(view(info->components[0].type_name), "create_throws");
  const auto* vtable = static_cast<const rh_HookVtable*>(info->components[0].vtable);
  host.config({});
  rh_CreateArgs args = host.create_args("create_throws", "/tmp");
  rh_HookInstance* instance = nullptr;
  try {
    FakeHost::take(vtable->Create(&args, &instance));
    ADD_FAILURE() << "Create returned instead of throwing";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom from create");
  }
}

TEST(TestPluginsTest, HelperPluginProvidesAllThreeKinds) {
  FakeHost host;
  LoadedPlugin plugin = open_test_plugin("rh_test_helper_hook");
  const rh_PluginInfo* info = plugin.info();
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(info->num_components, 3u);
  EXPECT_EQ(view(info->components[0].type_name), "helper_hook");
  EXPECT_EQ(info->components[1].kind, RH_COMPONENT_STRATEGY);
  EXPECT_EQ(view(info->components[1].type_name), "helper_strategy");
  EXPECT_EQ(info->components[2].kind, RH_COMPONENT_CHECKPOINT_IO);
  EXPECT_EQ(view(info->components[2].type_name), "helper_io");

  // Hook: defaults, then each failure.
  const auto* hook = static_cast<const rh_HookVtable*>(info->components[0].vtable);
  host.config({});
  rh_CreateArgs args = host.create_args("helper_hook", "/tmp");
  rh_HookInstance* instance = nullptr;
  ASSERT_EQ(FakeHost::take(hook->Create(&args, &instance)).first, RH_ERROR_OK);
  EXPECT_EQ(host.lookups(),
            (std::set<std::string>{"hooks.0.threshold", "hooks.0.fail", "hooks.0.log_dirs"}));
  ASSERT_NE(hook->EventMask, nullptr);
  EXPECT_EQ(hook->EventMask(instance),
            RH_EVENT_BIT(RH_EVENT_BEFORE_RUN) | RH_EVENT_BIT(RH_EVENT_AFTER_RUN));
  ASSERT_NE(hook->Priority, nullptr);
  EXPECT_EQ(hook->Priority(instance), 30);
  EventBuilder events;
  rh_HookEventArgs event = events.args(RH_EVENT_AFTER_RUN);
  EXPECT_EQ(FakeHost::take(hook->OnEvent(instance, &event)).first, RH_ERROR_OK);
  hook->Destroy(instance);
  hook->Destroy(nullptr);

  host.config({{"fail", "true"}});
  auto [fail_code, fail_message] = FakeHost::take(hook->Create(&args, &instance));
  EXPECT_EQ(fail_code, RH_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fail_message, "HelperHook asked to fail");

  host.config({{"threshold", "-1"}});
  auto [neg_code, neg_message] = FakeHost::take(hook->Create(&args, &instance));
  EXPECT_EQ(neg_code, RH_ERROR_INVALID_CONFIG);
  EXPECT_EQ(neg_message, "job.yaml:7:3: hooks.0.threshold: must be >= 0");

  // Strategy: SetupEnv picks the CPU.
  const auto* strategy = static_cast<const rh_StrategyVtable*>(info->components[1].vtable);
  host.config({});
  rh_CreateArgs sargs = host.create_args("helper_strategy", "/tmp");
  rh_StrategyInstance* s = nullptr;
  ASSERT_EQ(FakeHost::take(strategy->Create(&sargs, &s)).first, RH_ERROR_OK);
  rh_SetupEnvArgs env{};
  env.struct_size = RH_SETUP_ENV_ARGS_STRUCT_SIZE;
  env.device = DLDevice{kDLCUDA, 3};
  EXPECT_EQ(FakeHost::take(strategy->SetupEnv(s, &env)).first, RH_ERROR_OK);
  EXPECT_EQ(env.device.device_type, kDLCPU);
  EXPECT_EQ(env.device.device_id, 0);
  strategy->Destroy(s);

  // Checkpoint IO: save and load are unimplemented.
  const auto* io = static_cast<const rh_CheckpointIoVtable*>(info->components[2].vtable);
  rh_CreateArgs iargs = host.create_args("helper_io", "/tmp");
  rh_CheckpointIoInstance* c = nullptr;
  ASSERT_EQ(FakeHost::take(io->Create(&iargs, &c)).first, RH_ERROR_OK);
  rh_CheckpointFileArgs file{RH_CHECKPOINT_FILE_ARGS_STRUCT_SIZE, RH_STR("/tmp"), RH_STR("model"),
                             nullptr};
  EXPECT_EQ(FakeHost::take(io->Save(c, &file)).first, RH_ERROR_UNIMPLEMENTED);
  EXPECT_EQ(FakeHost::take(io->Load(c, &file)).first, RH_ERROR_UNIMPLEMENTED);
  io->Destroy(c);
}

TEST(TestPluginsTest, NullInfo) {
  LoadedPlugin plugin = open_test_plugin("rh_test_null_info");
  ASSERT_NE(plugin.entry, nullptr);
  EXPECT_EQ(plugin.info(), nullptr);
}

TEST(TestPluginsTest, NotAPlugin) {
  LoadedPlugin plugin = open_test_plugin("rh_test_not_a_plugin");
  EXPECT_EQ(plugin.entry, nullptr);
  EXPECT_NE(dlsym(plugin.handle, "rh_test_not_a_plugin_answer"), nullptr);
}

}  // namespace
}  // namespace rh::test
