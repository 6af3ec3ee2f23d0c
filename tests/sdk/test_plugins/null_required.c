/* null_required.c — a hook vtable whose required OnEvent is NULL.
 *
 * Type `null_required`: the host must refuse the component (naming the
 * plugin, the type and the missing entry) instead of crashing on the first
 * event.
 */
#include "test_hook.h"

static const rh_HookVtable kVtable = {RH_HOOK_VTABLE_STRUCT_SIZE, TestHook_Create,
                                      TestHook_Destroy,           TestHook_EventMask,
                                      TestHook_Priority,          NULL};

static const rh_Component kComponents[] = {
    TEST_HOOK_COMPONENT("null_required", "required OnEvent is NULL (host refuses)", &kVtable)};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_null_required"),
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
