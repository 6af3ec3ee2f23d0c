// create_throws.cpp — a buggy third-party plugin in C++ without the SDK's
// helpers: its hook's Create lets a C++ exception escape straight across the
// C boundary (plain extern "C", no try/catch).
//
// Type `create_throws`: the host must contain it — report an error naming
// the plugin and the type ("boom from create") instead of terminating.
// Type `event_throws`: created fine, its OnEvent throws ("boom from
// on_event"); the host reports it naming the hook and the entry.
#include <cstdlib>
#include <stdexcept>

#include "rh/rh_plugin.h"

namespace {

struct ThrowingHook {
  const rh_HostApi* host;
};

}  // namespace

extern "C" {

static rh_Error* CreateThrows_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  // Real work first (a config lookup), then the bug.
  const rh_ConfigNode* label = args->host->Config_Get(args->config, "label", 5);
  (void)label;
  (void)out;
  throw std::runtime_error("boom from create");
}

static void CreateThrows_Destroy(rh_HookInstance* instance) {
  delete reinterpret_cast<ThrowingHook*>(instance);
}

static rh_Error* CreateThrows_OnEvent(rh_HookInstance* instance, const rh_HookEventArgs* args) {
  (void)instance;
  (void)args;
  return nullptr;
}

static const rh_HookVtable kVtable = {
    RH_HOOK_VTABLE_STRUCT_SIZE, CreateThrows_Create, CreateThrows_Destroy, nullptr, nullptr,
    CreateThrows_OnEvent};

static rh_Error* EventThrows_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  *out = reinterpret_cast<rh_HookInstance*>(new ThrowingHook{args->host});
  return nullptr;
}

static rh_Error* EventThrows_OnEvent(rh_HookInstance* instance, const rh_HookEventArgs* args) {
  (void)instance;
  (void)args;
  throw std::runtime_error("boom from on_event");
}

static const rh_HookVtable kEventThrowsVtable = {
    RH_HOOK_VTABLE_STRUCT_SIZE, EventThrows_Create, CreateThrows_Destroy, nullptr, nullptr,
    EventThrows_OnEvent};

static const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("create_throws"),
     RH_STR("Create throws a C++ exception across the C ABI (host contains it)"), &kVtable},
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("event_throws"),
     RH_STR("OnEvent throws a C++ exception across the C ABI (host contains it)"),
     &kEventThrowsVtable}};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_create_throws"),
                                    RH_STR("0.1.0"),
                                    RH_NATIVE_TAG_NONE,
                                    kComponents,
                                    2,
                                    nullptr,
                                    nullptr};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}

}  // extern "C"
