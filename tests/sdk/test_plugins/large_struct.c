/* large_struct.c — a plugin from a newer minor (RH_ABI_VERSION_MINOR + 1):
 * rh_PluginInfo, rh_Component and rh_HookVtable each carry fields this host
 * does not know, appended after the 1.x fields; struct_size is the bigger
 * size. The host must read the fields it knows, ignore the rest, and never
 * call the trailing function pointers (they abort).
 *
 * Types `large_struct` and `large_struct_second`: counting hooks. Both must
 * be listed, load and work.
 */
#include <stdlib.h>

#include "test_hook.h"

#define LARGE_STRUCT_MAGIC UINT64_C(0xdeadbeef)

static void LargeStruct_Future(void) {
  abort(); /* a field of a newer minor: the host must not call it */
}

typedef struct LargeHookVtable {
  rh_HookVtable base;
  rh_Error* (*OnFutureEvent)(rh_HookInstance* instance, const void* args);
  uint64_t magic;
} LargeHookVtable;

typedef struct LargeComponent {
  rh_Component base;
  void (*future)(void);
  uint64_t magic;
} LargeComponent;

typedef struct LargePluginInfo {
  rh_PluginInfo base;
  void (*future)(void);
  uint64_t magic;
} LargePluginInfo;

static rh_Error* LargeStruct_OnFutureEvent(rh_HookInstance* instance, const void* args) {
  (void)instance;
  (void)args;
  abort();
}

static const LargeHookVtable kVtable = {{sizeof(LargeHookVtable), TestHook_Create, TestHook_Destroy,
                                         TestHook_EventMask, TestHook_Priority, TestHook_OnEvent},
                                        LargeStruct_OnFutureEvent,
                                        LARGE_STRUCT_MAGIC};

/* Two components, so the host must walk the array with the plugin's
 * struct_size as the stride (rh_PluginInfo::components), not with
 * sizeof(rh_Component). */
static const LargeComponent kComponents[] = {
    {{sizeof(LargeComponent), RH_COMPONENT_HOOK, RH_STR("large_struct"),
      RH_STR("structs of a newer minor with unknown trailing fields"), &kVtable.base},
     LargeStruct_Future,
     LARGE_STRUCT_MAGIC},
    {{sizeof(LargeComponent), RH_COMPONENT_HOOK, RH_STR("large_struct_second"),
      RH_STR("second component: found only with the right array stride"), &kVtable.base},
     LargeStruct_Future,
     LARGE_STRUCT_MAGIC}};

static const LargePluginInfo kInfo = {
    {sizeof(LargePluginInfo), RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR + 1,
     RH_STR("rh_test_large_struct"), RH_STR("0.1.0"), RH_NATIVE_TAG_NONE, &kComponents[0].base,
     sizeof(kComponents) / sizeof(kComponents[0]), NULL, NULL},
    LargeStruct_Future,
    LARGE_STRUCT_MAGIC};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo.base;
}
