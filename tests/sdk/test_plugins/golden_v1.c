/* golden_v1.c — a hook plugin built ONLY against the frozen ABI 1.0 headers
 * (tests/sdk/golden_v1/include). It proves that a plugin built for 1.0 keeps
 * loading and working in every later 1.x host. Self-contained on purpose: it
 * shares no code with the other test plugins, which follow the current SDK.
 *
 * Type `golden_v1`: counts the events it sees; optional config key `label`.
 */
#include <stdlib.h>
#include <string.h>

#include "rh/rh_plugin.h"

/* Fails to compile if the include path picked up the current SDK instead of
 * the golden copy after a minor bump. */
RH_STATIC_ASSERT(RH_ABI_VERSION_MAJOR == 1 && RH_ABI_VERSION_MINOR == 0,
                 "golden_v1 must be built against the frozen ABI 1.0 headers");

typedef struct GoldenHook {
  const rh_HostApi* host;
  uint64_t events;
  char label[64];
} GoldenHook;

static rh_Error* GoldenHook_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  const rh_HostApi* host = args->host;
  const rh_ConfigNode* node = host->Config_Get(args->config, "label", 5);
  rh_StringView label = {"", 0};
  GoldenHook* hook;
  size_t size;
  if (node != NULL && host->Config_Kind(node) != RH_CONFIG_NULL) {
    rh_Error* error = host->Config_AsString(node, &label);
    if (error != NULL) return error;
  }
  hook = calloc(1, sizeof(*hook));
  if (hook == NULL) return host->Error_Create(RH_ERROR_INTERNAL, "out of memory", 13);
  hook->host = host;
  size = label.size < sizeof(hook->label) - 1 ? label.size : sizeof(hook->label) - 1;
  if (size > 0) memcpy(hook->label, label.data, size);
  *out = (rh_HookInstance*)hook;
  return NULL;
}

static void GoldenHook_Destroy(rh_HookInstance* instance) { free(instance); }

static uint64_t GoldenHook_EventMask(const rh_HookInstance* instance) {
  (void)instance;
  return RH_EVENT_MASK_ALL;
}

static int32_t GoldenHook_Priority(const rh_HookInstance* instance) {
  (void)instance;
  return RH_PRIORITY_NORMAL;
}

static rh_Error* GoldenHook_OnEvent(rh_HookInstance* instance, const rh_HookEventArgs* args) {
  GoldenHook* hook = (GoldenHook*)instance;
  (void)args;
  hook->events += 1;
  return NULL;
}

static const rh_HookVtable kVtable = {RH_HOOK_VTABLE_STRUCT_SIZE, GoldenHook_Create,
                                      GoldenHook_Destroy,         GoldenHook_EventMask,
                                      GoldenHook_Priority,        GoldenHook_OnEvent};

static const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("golden_v1"),
     RH_STR("ABI 1.0 golden plugin: counts events"), &kVtable}};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_golden_v1"),
                                    RH_STR("1.0.0"),
                                    RH_NATIVE_TAG_NONE,
                                    kComponents,
                                    1,
                                    NULL,
                                    NULL};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}
