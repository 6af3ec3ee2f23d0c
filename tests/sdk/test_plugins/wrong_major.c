/* wrong_major.c — a plugin built for the next ABI major.
 *
 * Type `wrong_major`: the host must refuse the plugin, naming both majors.
 */
#include "test_hook.h"

static const rh_HookVtable kVtable = TEST_HOOK_VTABLE_INIT;

static const rh_Component kComponents[] = {
    TEST_HOOK_COMPONENT("wrong_major", "built for ABI major + 1 (host refuses)", &kVtable)};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR + 1,
                                    0,
                                    RH_STR("rh_test_wrong_major"),
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
