/* alias_named_strategy.c — a third-party strategy whose type name is one of
 * runner-host's type aliases (MMEngine's DeepSpeedStrategy, which is zero
 * when no plugin provides the name): the host tests show that a plugin
 * providing the name itself wins over the alias.
 *
 * Create keeps nothing (every key of its subtree is looked up, so the
 * host's unknown-key check passes); SetupEnv leaves the defaults.
 */
#include <stddef.h>

#include "rh/rh_plugin.h"

static int kInstance;

static rh_Error* AliasNamed_Create(const rh_CreateArgs* args, rh_StrategyInstance** out) {
  size_t i;
  for (i = 0; i < args->host->Config_Size(args->config); ++i) {
    rh_StringView key = args->host->Config_KeyAt(args->config, i);
    (void)args->host->Config_Get(args->config, key.data, key.size);
  }
  *out = (rh_StrategyInstance*)&kInstance;
  return NULL;
}

static rh_Error* AliasNamed_SetupEnv(rh_StrategyInstance* instance, rh_SetupEnvArgs* args) {
  (void)instance;
  (void)args;
  return NULL;
}

static const rh_StrategyVtable kVtable = {
    .struct_size = RH_STRUCT_SIZE(rh_StrategyVtable, SetupEnv),
    .Create = AliasNamed_Create,
    .SetupEnv = AliasNamed_SetupEnv};

static const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_STRATEGY, RH_STR("DeepSpeedStrategy"),
     RH_STR("a third-party strategy named like MMEngine's DeepSpeedStrategy"), &kVtable}};

static const rh_PluginInfo kInfo = {RH_PLUGIN_INFO_STRUCT_SIZE,
                                    RH_ABI_VERSION_MAJOR,
                                    RH_ABI_VERSION_MINOR,
                                    RH_STR("rh_test_alias_named_strategy"),
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
