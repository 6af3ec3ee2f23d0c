/* null_entries.c — every optional entry NULL: the hook vtable has no
 * Destroy, EventMask or Priority, the plugin no Init or Shutdown. The host
 * must apply the documented defaults (every event, RH_PRIORITY_NORMAL, no
 * destroy call).
 *
 * Type `null_entries`: a counting hook. Must load and work. Without Destroy
 * an instance can never be freed, so instances live in a static pool.
 */
#include "test_hook.h"

#define NULL_ENTRIES_MAX_INSTANCES 16

static TestHook g_instances[NULL_ENTRIES_MAX_INSTANCES];
static size_t g_num_instances; /* Create is never called concurrently */

static rh_Error* NullEntries_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  static const char kFull[] = "null_entries: too many instances (a static pool of 16)";
  TestHook* hook;
  rh_Error* error;
  if (g_num_instances == NULL_ENTRIES_MAX_INSTANCES) {
    return args->host->Error_Create(RH_ERROR_FAILED_PRECONDITION, kFull, sizeof(kFull) - 1);
  }
  hook = &g_instances[g_num_instances];
  error = test_hook_read_config(hook, args);
  if (error != NULL) return error;
  g_num_instances += 1;
  *out = (rh_HookInstance*)hook;
  return NULL;
}

static const rh_HookVtable kVtable = {
    RH_HOOK_VTABLE_STRUCT_SIZE, NullEntries_Create, NULL, NULL, NULL, TestHook_OnEvent};

static const rh_Component kComponents[] = {
    TEST_HOOK_COMPONENT("null_entries", "every optional vtable entry NULL", &kVtable)};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_null_entries"),
                                    RH_STR("0.1.0"),
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
