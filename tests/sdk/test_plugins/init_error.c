/* init_error.c — a plugin whose Init fails (e.g. a license server that
 * cannot be reached).
 *
 * Type `init_error`: the host must stop the job before any Create of this
 * plugin and report RH_ERROR_FAILED_PRECONDITION "license server unreachable
 * (test)" with the plugin's path.
 */
#include "test_hook.h"

static rh_Error* InitError_Init(const rh_InitArgs* args) {
  static const char kMessage[] = "license server unreachable (test)";
  return args->host->Error_Create(RH_ERROR_FAILED_PRECONDITION, kMessage, sizeof(kMessage) - 1);
}

static void InitError_Shutdown(void) {}

static const rh_HookVtable kVtable = TEST_HOOK_VTABLE_INIT;

static const rh_Component kComponents[] = {
    TEST_HOOK_COMPONENT("init_error", "Init returns an error (host stops the job)", &kVtable)};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_init_error"),
                                    RH_STR("0.1.0"),
                                    RH_NATIVE_TAG_NONE,
                                    kComponents,
                                    1,
                                    InitError_Init,
                                    InitError_Shutdown};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}
