/* trace_hook.c — the `trace` hook: records every lifecycle event to a text
 * file, one line per event, so tests can compare a run's event sequence with
 * a golden one (docs/architecture.md §3).
 *
 * This file is also the example of a plugin written in plain C (C11, no
 * extensions) for third parties: it uses nothing but the SDK's C headers and
 * the host API table. The whole plugin is the static rh_PluginInfo at the
 * bottom, one vtable, and the four functions it points to. Everything the
 * plugin needs from the host (configuration, errors, checkpoint state) goes
 * through rh_HostApi; nothing C++ is involved.
 *
 * Job file:
 *   hooks:
 *     - type: trace
 *       path: trace.log   # default; relative to work_dir
 *       append: false     # default: truncate the file at the first event
 *
 * The file is opened at the first event, not at Create, so that a dry run
 * (which creates every component) writes nothing.
 *
 * Line format (flushed after each line):
 *   <event> mode=<train|val|test> epoch=<e> iter=<i> inner_iter=<j>
 *       [ <metric>=<value %.6g>]... [ dir=<checkpoint_dir>] [ events_seen=<n>]
 *
 * `events_seen` counts the events this hook has handled, the current one
 * included. It is saved with every checkpoint (before_save_checkpoint) and
 * restored on after_load_checkpoint, which then counts itself on top of the
 * restored value: a resumed run continues the count of the run it resumes.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rh/rh_plugin.h"

#define TRACE_DEFAULT_PATH "trace.log"
#define TRACE_STATE_KEY "events_seen"

typedef struct TraceHook {
  const rh_HostApi* host; /* owned by the host, valid until exit */
  FILE* file;             /* NULL until the first event */
  int32_t append;         /* open with "a" instead of "w" */
  char* path;             /* the resolved path, NUL-terminated, owned */
  uint64_t events_seen;   /* events handled so far, the current one included */
} TraceHook;

/* ---- Small helpers -------------------------------------------------------- */

static rh_Error* trace_error(const rh_HostApi* host, rh_ErrorCode code, const char* message) {
  return host->Error_Create(code, message, strlen(message));
}

/* Event name: the enum name without RH_EVENT_, lowercased. Events added by a
 * later ABI minor are written as event_<n>. */
static const char* trace_event_name(rh_HookEvent event) {
  static const char* const kNames[RH_EVENT_COUNT_V1] = {
      [RH_EVENT_BEFORE_RUN] = "before_run",
      [RH_EVENT_AFTER_RUN] = "after_run",
      [RH_EVENT_BEFORE_TRAIN] = "before_train",
      [RH_EVENT_AFTER_TRAIN] = "after_train",
      [RH_EVENT_BEFORE_TRAIN_EPOCH] = "before_train_epoch",
      [RH_EVENT_AFTER_TRAIN_EPOCH] = "after_train_epoch",
      [RH_EVENT_BEFORE_TRAIN_ITER] = "before_train_iter",
      [RH_EVENT_AFTER_TRAIN_ITER] = "after_train_iter",
      [RH_EVENT_BEFORE_VAL] = "before_val",
      [RH_EVENT_AFTER_VAL] = "after_val",
      [RH_EVENT_BEFORE_VAL_EPOCH] = "before_val_epoch",
      [RH_EVENT_AFTER_VAL_EPOCH] = "after_val_epoch",
      [RH_EVENT_BEFORE_VAL_ITER] = "before_val_iter",
      [RH_EVENT_AFTER_VAL_ITER] = "after_val_iter",
      [RH_EVENT_BEFORE_TEST] = "before_test",
      [RH_EVENT_AFTER_TEST] = "after_test",
      [RH_EVENT_BEFORE_TEST_EPOCH] = "before_test_epoch",
      [RH_EVENT_AFTER_TEST_EPOCH] = "after_test_epoch",
      [RH_EVENT_BEFORE_TEST_ITER] = "before_test_iter",
      [RH_EVENT_AFTER_TEST_ITER] = "after_test_iter",
      [RH_EVENT_BEFORE_SAVE_CHECKPOINT] = "before_save_checkpoint",
      [RH_EVENT_AFTER_SAVE_CHECKPOINT] = "after_save_checkpoint",
      [RH_EVENT_AFTER_LOAD_CHECKPOINT] = "after_load_checkpoint",
  };
  if ((int)event >= 0 && (int)event < RH_EVENT_COUNT_V1) return kNames[event];
  return NULL;
}

static const char* trace_mode_name(rh_RunMode mode) {
  switch (mode) {
    case RH_MODE_TRAIN:
      return "train";
    case RH_MODE_VAL:
      return "val";
    case RH_MODE_TEST:
      return "test";
  }
  return "unknown";
}

/* Joins work_dir and a relative `path` (absolute paths are kept as they are).
 * Returns a malloc'ed NUL-terminated string, or NULL when out of memory. */
static char* trace_resolve_path(rh_StringView work_dir, rh_StringView path) {
  int absolute = path.size > 0 && path.data[0] == '/';
  size_t prefix = (absolute || work_dir.size == 0) ? 0 : work_dir.size;
  int slash = prefix > 0 && work_dir.data[work_dir.size - 1] != '/';
  char* out = malloc(prefix + (size_t)slash + path.size + 1);
  if (out == NULL) return NULL;
  if (prefix > 0) memcpy(out, work_dir.data, prefix);
  if (slash) out[prefix] = '/';
  if (path.size > 0) memcpy(out + prefix + (size_t)slash, path.data, path.size);
  out[prefix + (size_t)slash + path.size] = '\0';
  return out;
}

/* Parses the decimal text saved under TRACE_STATE_KEY. Returns 0 on success. */
static int trace_parse_count(rh_StringView text, uint64_t* out) {
  uint64_t value = 0;
  size_t i;
  if (text.size == 0 || text.size > 20) return -1;
  for (i = 0; i < text.size; ++i) {
    unsigned digit = (unsigned)(text.data[i] - '0');
    if (digit > 9) return -1;
    if (value > (UINT64_MAX - digit) / 10) return -1;
    value = value * 10 + digit;
  }
  *out = value;
  return 0;
}

/* ---- Configuration -------------------------------------------------------- */

/* Looks `key` up (the host records the lookup even when the key is absent,
 * so it knows the key is supported). NULL when absent or null (`key: ~`). */
static const rh_ConfigNode* trace_config_get(const rh_CreateArgs* args, const char* key) {
  const rh_HostApi* host = args->host;
  const rh_ConfigNode* node = host->Config_Get(args->config, key, strlen(key));
  if (node != NULL && host->Config_Kind(node) == RH_CONFIG_NULL) return NULL;
  return node;
}

/* "<what> '<path>': <strerror(errno)>" as an RH_ERROR_IO error. */
static rh_Error* trace_io_error(const TraceHook* hook, const char* what) {
  const char* reason = strerror(errno);
  size_t size = strlen(what) + strlen(hook->path) + strlen(reason) + 16;
  char* message = malloc(size);
  rh_Error* error;
  if (message == NULL) return trace_error(hook->host, RH_ERROR_IO, what);
  snprintf(message, size, "%s '%s': %s", what, hook->path, reason);
  error = trace_error(hook->host, RH_ERROR_IO, message);
  free(message);
  return error;
}

/* ---- The vtable ----------------------------------------------------------- */

static void TraceHook_Destroy(rh_HookInstance* instance) {
  TraceHook* hook = (TraceHook*)instance;
  if (hook == NULL) return;
  if (hook->file != NULL) fclose(hook->file);
  free(hook->path);
  free(hook);
}

static rh_Error* TraceHook_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  const rh_HostApi* host = args->host;
  /* Every supported key is looked up before any is read. */
  const rh_ConfigNode* path_node = trace_config_get(args, "path");
  const rh_ConfigNode* append_node = trace_config_get(args, "append");
  rh_StringView path = RH_STR(TRACE_DEFAULT_PATH);
  int32_t append = 0;
  TraceHook* hook;
  rh_Error* error;

  /* Type errors come from the host and name file:line:column and key path. */
  if (path_node != NULL && (error = host->Config_AsString(path_node, &path)) != NULL) return error;
  if (append_node != NULL && (error = host->Config_AsBool(append_node, &append)) != NULL) {
    return error;
  }
  if (path.size == 0) {
    static const char kMessage[] = "must not be empty";
    return host->Config_Error(path_node, kMessage, sizeof(kMessage) - 1);
  }

  hook = calloc(1, sizeof(*hook));
  if (hook == NULL) return trace_error(host, RH_ERROR_INTERNAL, "out of memory");
  hook->host = host;
  hook->path = trace_resolve_path(args->work_dir, path);
  if (hook->path == NULL) {
    TraceHook_Destroy((rh_HookInstance*)hook);
    return trace_error(host, RH_ERROR_INTERNAL, "out of memory");
  }

  hook->append = append;
  *out = (rh_HookInstance*)hook;
  return NULL;
}

static uint64_t TraceHook_EventMask(const rh_HookInstance* instance) {
  (void)instance;
  return RH_EVENT_MASK_ALL;
}

static int32_t TraceHook_Priority(const rh_HookInstance* instance) {
  (void)instance;
  return RH_PRIORITY_VERY_LOW; /* late: sees what the other hooks did */
}

/* Saves (before_save_checkpoint) or restores (after_load_checkpoint) the
 * event count. Runs after the count includes the current event. */
static rh_Error* trace_checkpoint_state(TraceHook* hook, const rh_HookEventArgs* args) {
  const rh_HostApi* host = hook->host;
  if (args->checkpoint == NULL) return NULL;
  if (args->event == RH_EVENT_BEFORE_SAVE_CHECKPOINT) {
    char text[32];
    int size = snprintf(text, sizeof(text), "%llu", (unsigned long long)hook->events_seen);
    return host->StateDict_PutBytes(args->checkpoint, TRACE_STATE_KEY, strlen(TRACE_STATE_KEY),
                                    text, (size_t)size);
  } else {
    rh_StringView saved = {NULL, 0};
    uint64_t restored = 0;
    rh_Error* error = host->StateDict_GetBytes(args->checkpoint, TRACE_STATE_KEY,
                                               strlen(TRACE_STATE_KEY), &saved);
    if (error != NULL) {
      if (host->Error_Code(error) != RH_ERROR_NOT_FOUND) return error;
      host->Error_Destroy(error); /* a checkpoint written without a trace hook */
      return NULL;
    }
    if (trace_parse_count(saved, &restored) != 0) {
      return trace_error(host, RH_ERROR_DATA_LOSS,
                         "trace hook: checkpoint entry '" TRACE_STATE_KEY
                         "' is not a decimal count");
    }
    hook->events_seen = restored + 1; /* + this after_load_checkpoint */
    return NULL;
  }
}

static rh_Error* TraceHook_OnEvent(rh_HookInstance* instance, const rh_HookEventArgs* args) {
  TraceHook* hook = (TraceHook*)instance;
  const rh_RunState* state = args->state;
  const char* name = trace_event_name(args->event);
  int checkpoint_event = args->event == RH_EVENT_BEFORE_SAVE_CHECKPOINT ||
                         args->event == RH_EVENT_AFTER_LOAD_CHECKPOINT;
  FILE* f;
  size_t i;

  if (hook->file == NULL) {
    hook->file = fopen(hook->path, hook->append ? "a" : "w");
    if (hook->file == NULL) return trace_io_error(hook, "cannot open trace file");
  }
  f = hook->file;

  hook->events_seen += 1;
  if (checkpoint_event) {
    rh_Error* error = trace_checkpoint_state(hook, args);
    if (error != NULL) return error;
  }

  if (name != NULL) {
    fputs(name, f);
  } else {
    fprintf(f, "event_%d", (int)args->event);
  }
  fprintf(f, " mode=%s epoch=%lld iter=%lld inner_iter=%lld", trace_mode_name(state->mode),
          (long long)state->epoch, (long long)state->iter, (long long)state->inner_iter);
  for (i = 0; i < args->num_metrics; ++i) {
    const rh_Metric* metric = &args->metrics[i];
    fprintf(f, " %.*s=%.6g", (int)metric->name.size, metric->name.data, metric->value);
  }
  if (args->checkpoint_dir.size > 0) {
    fprintf(f, " dir=%.*s", (int)args->checkpoint_dir.size, args->checkpoint_dir.data);
  }
  if (checkpoint_event) {
    fprintf(f, " events_seen=%llu", (unsigned long long)hook->events_seen);
  }
  fputc('\n', f);

  if (fflush(f) != 0 || ferror(f)) return trace_io_error(hook, "cannot write trace file");
  return NULL;
}

/* ---- What the plugin exports ---------------------------------------------- */

/* Designated initializers (C99) name every field; entries left out are NULL. */
static const rh_HookVtable kTraceHookVtable = {
    .struct_size = RH_HOOK_VTABLE_STRUCT_SIZE,
    .Create = TraceHook_Create,
    .Destroy = TraceHook_Destroy,
    .EventMask = TraceHook_EventMask,
    .Priority = TraceHook_Priority,
    .OnEvent = TraceHook_OnEvent,
};

static const rh_Component kComponents[] = {{
    .struct_size = RH_COMPONENT_STRUCT_SIZE,
    .kind = RH_COMPONENT_HOOK,
    .type_name = RH_STR("trace"),
    .description = RH_STR("records every lifecycle event to a text file (golden-sequence tests)"),
    .vtable = &kTraceHookVtable,
}};

static const rh_PluginInfo kPluginInfo = {
    .struct_size = RH_PLUGIN_INFO_STRUCT_SIZE,
    .abi_major = RH_ABI_VERSION_MAJOR,
    .abi_minor = RH_ABI_VERSION_MINOR,
    .name = RH_STR("rh_hook_trace"),
    .version = RH_STR("0.1.0"),
    .native_tag = RH_NATIVE_TAG_NONE, /* plain C: accepted by any host */
    .components = kComponents,
    .num_components = sizeof(kComponents) / sizeof(kComponents[0]),
    .Init = NULL,
    .Shutdown = NULL,
};

RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t host_abi_major, uint32_t host_abi_minor) {
  (void)host_abi_major; /* the host checks the major; any minor works */
  (void)host_abi_minor;
  return &kPluginInfo;
}
