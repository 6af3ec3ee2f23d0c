/* native_mismatch.c — a plugin claiming to link a LibTorch the host is not
 * built with (torch_version "0.0.0-test", device "cpu", cxx11_abi 1).
 *
 * Type `native_mismatch`: the host must refuse the plugin with a message
 * naming both native tags (the plugin's and its own).
 */
#include "test_hook.h"

static const rh_HookVtable kVtable = TEST_HOOK_VTABLE_INIT;

static const rh_Component kComponents[] = {TEST_HOOK_COMPONENT(
    "native_mismatch", "native tag of another LibTorch (host refuses)", &kVtable)};

static const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_test_native_mismatch"),
    RH_STR("0.1.0"),
    {RH_NATIVE_TAG_STRUCT_SIZE, RH_STR("0.0.0-test"), RH_STR("cpu"), 1},
    kComponents,
    1,
    NULL,
    NULL};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}
