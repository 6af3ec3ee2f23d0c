/* small_struct.c — a plugin from an older minor whose rh_PluginInfo ended
 * before Init/Shutdown: struct_size = offsetof(rh_PluginInfo, Init). The
 * Init/Shutdown fields still hold functions (whatever lies past struct_size
 * is garbage to the host), and both abort(): the host must treat the fields
 * past struct_size as absent and never call them.
 *
 * Type `small_struct`: a counting hook with a full-size vtable. Must load and
 * work.
 */
#include <stdlib.h>

#include "test_hook.h"

static rh_Error* SmallStruct_Init(const rh_InitArgs* args) {
  (void)args;
  abort(); /* past struct_size: the host must not call it */
}

static void SmallStruct_Shutdown(void) {
  abort(); /* past struct_size: the host must not call it */
}

static const rh_HookVtable kVtable = TEST_HOOK_VTABLE_INIT;

static const rh_Component kComponents[] = {TEST_HOOK_COMPONENT(
    "small_struct", "rh_PluginInfo without Init/Shutdown (older minor)", &kVtable)};

static const rh_PluginInfo kInfo = {offsetof(rh_PluginInfo, Init),
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_small_struct"),
                                    RH_STR("0.1.0"),
                                    RH_NATIVE_TAG_NONE,
                                    kComponents,
                                    1,
                                    SmallStruct_Init,
                                    SmallStruct_Shutdown};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}
