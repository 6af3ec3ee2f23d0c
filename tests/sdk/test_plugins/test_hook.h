/* test_hook.h — the counting hook shared by the ABI test plugins.
 *
 * Each test plugin bends one rule of the ABI (struct sizes, NULL entries,
 * versions, tags) around an otherwise ordinary hook: Create reads the
 * optional `label` key (Config_Get + Config_AsString) and allocates an
 * instance, OnEvent counts the events. Only the plugin's rh_PluginInfo,
 * components and vtable differ from one test plugin to the next.
 *
 * Functions are `static inline` so a plugin that does not use one of them
 * compiles without an unused-function warning.
 */
#ifndef RH_TESTS_ABI_TEST_HOOK_H_
#define RH_TESTS_ABI_TEST_HOOK_H_

#include <stdlib.h>
#include <string.h>

#include "rh/rh_plugin.h"

typedef struct TestHook {
  const rh_HostApi* host;
  rh_Context* context;
  uint64_t events; /* events handled so far */
  char label[64];  /* the `label` key, truncated; empty when absent */
} TestHook;

/* Reads the component's config into *hook. */
static inline rh_Error* test_hook_read_config(TestHook* hook, const rh_CreateArgs* args) {
  const rh_HostApi* host = args->host;
  const rh_ConfigNode* node = host->Config_Get(args->config, "label", 5);
  rh_StringView label = {"", 0};
  size_t size;
  hook->host = host;
  hook->context = args->context;
  hook->events = 0;
  hook->label[0] = '\0';
  if (node != NULL && host->Config_Kind(node) != RH_CONFIG_NULL) {
    rh_Error* error = host->Config_AsString(node, &label);
    if (error != NULL) return error;
  }
  size = label.size < sizeof(hook->label) - 1 ? label.size : sizeof(hook->label) - 1;
  if (size > 0) memcpy(hook->label, label.data, size);
  hook->label[size] = '\0';
  return NULL;
}

static inline rh_Error* TestHook_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  rh_Error* error;
  TestHook* hook = malloc(sizeof(*hook));
  if (hook == NULL) return args->host->Error_Create(RH_ERROR_INTERNAL, "out of memory", 13);
  error = test_hook_read_config(hook, args);
  if (error != NULL) {
    free(hook);
    return error;
  }
  *out = (rh_HookInstance*)hook;
  return NULL;
}

static inline void TestHook_Destroy(rh_HookInstance* instance) { free(instance); }

static inline uint64_t TestHook_EventMask(const rh_HookInstance* instance) {
  (void)instance;
  return RH_EVENT_MASK_ALL;
}

static inline int32_t TestHook_Priority(const rh_HookInstance* instance) {
  (void)instance;
  return RH_PRIORITY_NORMAL;
}

static inline rh_Error* TestHook_OnEvent(rh_HookInstance* instance, const rh_HookEventArgs* args) {
  TestHook* hook = (TestHook*)instance;
  (void)args;
  hook->events += 1;
  return NULL;
}

/* A vtable with every entry, for plugins that bend something else. */
#define TEST_HOOK_VTABLE_INIT                                                          \
  {                                                                                    \
    RH_HOOK_VTABLE_STRUCT_SIZE, TestHook_Create, TestHook_Destroy, TestHook_EventMask, \
        TestHook_Priority, TestHook_OnEvent                                            \
  }

/* One hook component of type `type` (a string literal). */
#define TEST_HOOK_COMPONENT(type, description, vtable_ptr) \
  { RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR(type), RH_STR(description), (vtable_ptr) }

#endif /* RH_TESTS_ABI_TEST_HOOK_H_ */
