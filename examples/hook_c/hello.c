/* hello.c — the smallest runner-host hook, in plain C.
 *
 * Type `hello`: logs a line at before_run and at after_run. The plugin is
 * the rh_PluginInfo at the bottom, one vtable and the functions it points
 * to; everything else comes from the host through rh_HostApi.
 */
#include <stdlib.h>

#include "rh/rh_plugin.h"

typedef struct Hello {
  const rh_HostApi* host;
  rh_Context* context;
} Hello;

static rh_Error* Hello_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  Hello* hello = malloc(sizeof(*hello));
  if (hello == NULL) return args->host->Error_Create(RH_ERROR_INTERNAL, "out of memory", 13);
  hello->host = args->host;
  hello->context = args->context;
  *out = (rh_HookInstance*)hello;
  return NULL;
}

static void Hello_Destroy(rh_HookInstance* instance) { free(instance); /* free(NULL) is fine */ }

static uint64_t Hello_EventMask(const rh_HookInstance* instance) {
  (void)instance;
  return RH_EVENT_BIT(RH_EVENT_BEFORE_RUN) | RH_EVENT_BIT(RH_EVENT_AFTER_RUN);
}

static rh_Error* Hello_OnEvent(rh_HookInstance* instance, const rh_HookEventArgs* args) {
  static const rh_StringView kBefore = RH_STR("hello: the run starts");
  static const rh_StringView kAfter = RH_STR("hello: the run is over");
  Hello* hello = (Hello*)instance;
  const rh_StringView* line = args->event == RH_EVENT_BEFORE_RUN ? &kBefore : &kAfter;
  hello->host->Log(hello->context, RH_LOG_INFO, line->data, line->size);
  return NULL;
}

static const rh_HookVtable kHelloVtable = {
    .struct_size = RH_HOOK_VTABLE_STRUCT_SIZE,
    .Create = Hello_Create,
    .Destroy = Hello_Destroy,
    .EventMask = Hello_EventMask,
    .OnEvent = Hello_OnEvent, /* Priority left NULL: RH_PRIORITY_NORMAL */
};

static const rh_Component kComponents[] = {{
    .struct_size = RH_COMPONENT_STRUCT_SIZE,
    .kind = RH_COMPONENT_HOOK,
    .type_name = RH_STR("hello"),
    .description = RH_STR("logs a line when the run starts and ends"),
    .vtable = &kHelloVtable,
}};

static const rh_PluginInfo kInfo = {
    .struct_size = RH_PLUGIN_INFO_STRUCT_SIZE,
    .abi_major = RH_ABI_VERSION_MAJOR,
    .abi_minor = RH_ABI_VERSION_MINOR,
    .name = RH_STR("rh_example_hello"),
    .version = RH_STR("0.1.0"),
    .native_tag = RH_NATIVE_TAG_NONE,
    .components = kComponents,
    .num_components = 1,
};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major;
  (void)host_abi_minor;
  return &kInfo;
}
