/* rh_plugin.h — the plugin entry point and its self-description.
 *
 * A plugin is a shared library that exports exactly one symbol,
 * `rh_plugin_info` (RH_PLUGIN_ENTRY_SYMBOL). The host loads the library with
 * RTLD_NOW | RTLD_LOCAL, never unloads it, calls rh_plugin_info once, checks
 * the answer (ABI major, native tag) and registers the components it lists
 * under their `type:` names. Then it calls Init (if any) once, before the
 * first Create of any of the plugin's components.
 *
 * A plugin built with this header:
 *
 *   static const rh_Component kComponents[] = {{
 *     RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("my_hook"),
 *     RH_STR("what it does"), &kMyHookVtable}};
 *   static const rh_PluginInfo kInfo = {
 *     RH_PLUGIN_INFO_STRUCT_SIZE, RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR,
 *     RH_STR("my_plugin"), RH_STR("0.1.0"), RH_NATIVE_TAG_NONE,
 *     kComponents, 1, NULL, NULL};
 *   RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t major, uint32_t minor) {
 *     (void)major; (void)minor; return &kInfo;
 *   }
 */
#ifndef RH_PLUGIN_H_
#define RH_PLUGIN_H_

#include "rh/rh_ckpt_io.h"
#include "rh/rh_hook.h"
#include "rh/rh_host.h"
#include "rh/rh_strategy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RH_PLUGIN_ENTRY_SYMBOL "rh_plugin_info"

/* The native ABI a plugin's C++ side was built against. Plugins that link
 * LibTorch exchange at::Tensor storage with the host (at::fromDLPack), which
 * is only safe when both sides use the same LibTorch build: the host refuses
 * a plugin whose tag differs from its own. A plugin that does not link
 * LibTorch (e.g. one written in C) sets torch_version to the empty string and
 * is accepted by any host. */
typedef struct rh_NativeTag {
  /* Embedded by value in rh_PluginInfo, so its layout is frozen for ABI 1;
   * struct_size is checked but can never grow. */
  size_t struct_size;
  rh_StringView torch_version; /* "1.13.0"; empty = does not link LibTorch */
  rh_StringView device;        /* "cpu" or "cuda" (the LibTorch build's) */
  int32_t cxx11_abi;           /* _GLIBCXX_USE_CXX11_ABI, -1 when not C++ */
} rh_NativeTag;
#define RH_NATIVE_TAG_STRUCT_SIZE RH_STRUCT_SIZE(rh_NativeTag, cxx11_abi)
/* Initializer for plugins that do not link LibTorch. */
#define RH_NATIVE_TAG_NONE \
  { RH_NATIVE_TAG_STRUCT_SIZE, RH_STR(""), RH_STR(""), -1 }

/* One component a plugin provides. */
typedef struct rh_Component {
  size_t struct_size;
  rh_ComponentKind kind;
  rh_StringView type_name;   /* the YAML `type:` value; static */
  rh_StringView description; /* one line for --list-plugins; static */
  /* Points to an rh_StrategyVtable, rh_HookVtable or rh_CheckpointIoVtable
   * according to `kind`; static, its own struct_size first. */
  const void* vtable;
} rh_Component;
#define RH_COMPONENT_STRUCT_SIZE RH_STRUCT_SIZE(rh_Component, vtable)

/* Passed to Init. Borrowed for the call; `host` and `context` stay valid
 * until Shutdown returns. */
typedef struct rh_InitArgs {
  size_t struct_size;
  const rh_HostApi* host;
  rh_Context* context; /* the plugin's own context (logging) */
} rh_InitArgs;
#define RH_INIT_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_InitArgs, context)

/* struct_size, abi_major and abi_minor are the fixed prefix of every ABI
 * major version: the host reads them before anything else. */
typedef struct rh_PluginInfo {
  size_t struct_size;
  uint32_t abi_major;      /* RH_ABI_VERSION_MAJOR the plugin was built with */
  uint32_t abi_minor;      /* RH_ABI_VERSION_MINOR the plugin was built with */
  rh_StringView name;      /* plugin name, e.g. "rh_strategy_ddp"; static */
  rh_StringView version;   /* plugin version, e.g. "0.1.0"; static */
  rh_NativeTag native_tag; /* see above */
  /* Static array of num_components. Every element has the same struct_size,
   * which is also the array's stride (a newer plugin's elements may be
   * larger than this header's rh_Component). */
  const rh_Component* components;
  size_t num_components;
  /* Optional. Called once, before the first Create of any of its
   * components; an error stops the job, reported with the plugin's path. */
  rh_Error* (*Init)(const rh_InitArgs* args);
  /* Optional. Called once at exit after every instance was destroyed. */
  void (*Shutdown)(void);
} rh_PluginInfo;
#define RH_PLUGIN_INFO_STRUCT_SIZE RH_STRUCT_SIZE(rh_PluginInfo, Shutdown)

/* The entry point. Returns static data valid until the process exits (the
 * library is never unloaded), or NULL when the plugin cannot work with a
 * host of this ABI version (the host reports it as refused). */
typedef const rh_PluginInfo* (*rh_PluginInfoFn)(uint32_t host_abi_major, uint32_t host_abi_minor);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_PLUGIN_H_ */
