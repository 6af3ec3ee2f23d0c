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
 *       flush_lines: 100  # lines kept in memory before they are written (1: each
 *                         # line written at once)
 *       flush_seconds: 0.5  # ... or once the oldest kept line is this old
 *                           # (checked when a line is added)
 *
 * The file is opened at the first event, not at Create, so that a dry run
 * (which creates every component) writes nothing.
 *
 * Lines are kept in memory and written together, as the metrics hook does:
 * the trace writes two lines per train iteration, and a write(2) per line
 * cost small models more than the rest of the hook. The per-iteration events
 * (before/after_{train,val,test}_iter) only add their line; every other event
 * (epoch and loop boundaries, checkpoints, after_run, events of a later ABI
 * minor) writes everything kept, its own line included, and so does Destroy,
 * which the host also calls when the run fails with an error. Only a process
 * killed outright (SIGKILL, a crash signal) loses lines: at most the last
 * flush_lines lines or flush_seconds. Whole lines are written, never a part.
 *
 * Line format:
 *   <event> mode=<train|val|test> epoch=<e> iter=<i> inner_iter=<j>
 *       [ <metric>=<value %.6g>]... [ dir=<checkpoint_dir>] [ events_seen=<n>]
 *
 * `events_seen` counts the events this hook has handled, the current one
 * included. It is saved with every checkpoint (before_save_checkpoint) and
 * restored on after_load_checkpoint, which then counts itself on top of the
 * restored value: a resumed run continues the count of the run it resumes.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rh/rh_plugin.h"

#define TRACE_DEFAULT_PATH "trace.log"
#define TRACE_STATE_KEY "events_seen"
#define TRACE_DEFAULT_FLUSH_LINES 100
#define TRACE_DEFAULT_FLUSH_SECONDS 0.5

typedef struct TraceHook {
  const rh_HostApi* host; /* owned by the host, valid until exit */
  rh_Context* context;    /* for Log from Destroy; owned by the host */
  FILE* file;             /* NULL until the first event; unbuffered (pending is the buffer) */
  int32_t append;         /* open with "a" instead of "w" */
  char* path;             /* the resolved path, NUL-terminated, owned */
  uint64_t events_seen;   /* events handled so far, the current one included */
  int64_t flush_lines;    /* write once this many lines are kept */
  double flush_seconds;   /* ... or once the oldest kept line is this old */
  char* pending;          /* whole lines not yet written (not NUL-terminated), owned */
  size_t pending_size;
  size_t pending_capacity; /* kept across flushes: no allocation once grown */
  int64_t pending_lines;
  struct timespec oldest_pending; /* when the first kept line was added */
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

/* Seconds from `from` to now. timespec_get is C11's only clock (TIME_UTC:
 * the wall clock); a clock step only moves one flush earlier or later. */
static double trace_seconds_since(const struct timespec* from) {
  struct timespec now;
  if (timespec_get(&now, TIME_UTC) != TIME_UTC) return 0.0;
  return (double)(now.tv_sec - from->tv_sec) + (double)(now.tv_nsec - from->tv_nsec) * 1e-9;
}

/* Appends printf-formatted text to the kept lines, growing the buffer when
 * needed (doubling: once it holds flush_lines lines it stops growing).
 * Returns 0, or -1 when out of memory or the format fails. */
static int trace_appendf(TraceHook* hook, const char* format, ...) {
  for (;;) {
    size_t room = hook->pending_capacity - hook->pending_size;
    va_list args;
    int n;
    va_start(args, format);
    n = vsnprintf(hook->pending + hook->pending_size, room, format, args);
    va_end(args);
    if (n < 0) return -1;
    /* vsnprintf needs room for its NUL too, which the next append overwrites. */
    if ((size_t)n < room) {
      hook->pending_size += (size_t)n;
      return 0;
    }
    {
      size_t wanted = hook->pending_size + (size_t)n + 1;
      size_t capacity = hook->pending_capacity > 0 ? hook->pending_capacity : 4096;
      char* grown;
      while (capacity < wanted) capacity *= 2;
      grown = realloc(hook->pending, capacity);
      if (grown == NULL) return -1;
      hook->pending = grown;
      hook->pending_capacity = capacity;
    }
  }
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

/* Writes the kept lines (one write(2): the file is unbuffered). They are
 * dropped on a failed write too: the error stops the run, and Destroy must
 * not report the same error again. */
static rh_Error* trace_flush(TraceHook* hook) {
  size_t size = hook->pending_size;
  if (size == 0) return NULL;
  hook->pending_size = 0;
  hook->pending_lines = 0;
  if (fwrite(hook->pending, 1, size, hook->file) != size || fflush(hook->file) != 0) {
    return trace_io_error(hook, "cannot write trace file");
  }
  return NULL;
}

/* Events that only add their line; every other one writes what is kept. */
static int trace_is_iteration_event(rh_HookEvent event) {
  switch (event) {
    case RH_EVENT_BEFORE_TRAIN_ITER:
    case RH_EVENT_AFTER_TRAIN_ITER:
    case RH_EVENT_BEFORE_VAL_ITER:
    case RH_EVENT_AFTER_VAL_ITER:
    case RH_EVENT_BEFORE_TEST_ITER:
    case RH_EVENT_AFTER_TEST_ITER:
      return 1;
    default:
      return 0;
  }
}

/* ---- The vtable ----------------------------------------------------------- */

/* Also reached when the run fails: the host destroys its hooks while the
 * error unwinds, so the kept lines are written here. Destroy cannot return
 * an error: a failed last write is logged. */
static void TraceHook_Destroy(rh_HookInstance* instance) {
  TraceHook* hook = (TraceHook*)instance;
  if (hook == NULL) return;
  if (hook->file != NULL) {
    rh_Error* error = trace_flush(hook);
    if (error != NULL) {
      rh_StringView message = hook->host->Error_Message(error);
      hook->host->Log(hook->context, RH_LOG_ERROR, message.data, message.size);
      hook->host->Error_Destroy(error);
    }
    fclose(hook->file);
  }
  free(hook->pending);
  free(hook->path);
  free(hook);
}

static rh_Error* TraceHook_Create(const rh_CreateArgs* args, rh_HookInstance** out) {
  const rh_HostApi* host = args->host;
  /* Every supported key is looked up before any is read. */
  const rh_ConfigNode* path_node = trace_config_get(args, "path");
  const rh_ConfigNode* append_node = trace_config_get(args, "append");
  const rh_ConfigNode* flush_lines_node = trace_config_get(args, "flush_lines");
  const rh_ConfigNode* flush_seconds_node = trace_config_get(args, "flush_seconds");
  rh_StringView path = RH_STR(TRACE_DEFAULT_PATH);
  int32_t append = 0;
  int64_t flush_lines = TRACE_DEFAULT_FLUSH_LINES;
  double flush_seconds = TRACE_DEFAULT_FLUSH_SECONDS;
  TraceHook* hook;
  rh_Error* error;

  /* Type errors come from the host and name file:line:column and key path. */
  if (path_node != NULL && (error = host->Config_AsString(path_node, &path)) != NULL) return error;
  if (append_node != NULL && (error = host->Config_AsBool(append_node, &append)) != NULL) {
    return error;
  }
  if (flush_lines_node != NULL &&
      (error = host->Config_AsInt(flush_lines_node, &flush_lines)) != NULL) {
    return error;
  }
  if (flush_seconds_node != NULL &&
      (error = host->Config_AsDouble(flush_seconds_node, &flush_seconds)) != NULL) {
    return error;
  }
  if (path.size == 0) {
    static const char kMessage[] = "must not be empty";
    return host->Config_Error(path_node, kMessage, sizeof(kMessage) - 1);
  }
  if (flush_lines < 1) {
    char message[64];
    int size = snprintf(message, sizeof(message), "must be >= 1, got %lld", (long long)flush_lines);
    return host->Config_Error(flush_lines_node, message, (size_t)size);
  }
  if (!(flush_seconds >= 0.0) || flush_seconds > 3600.0) {
    char message[64];
    int size =
        snprintf(message, sizeof(message), "must be between 0 and 3600, got %g", flush_seconds);
    return host->Config_Error(flush_seconds_node, message, (size_t)size);
  }

  hook = calloc(1, sizeof(*hook));
  if (hook == NULL) return trace_error(host, RH_ERROR_INTERNAL, "out of memory");
  hook->host = host;
  hook->context = args->context;
  hook->flush_lines = flush_lines;
  hook->flush_seconds = flush_seconds;
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
  size_t line_start;
  int failed = 0;
  size_t i;

  if (hook->file == NULL) {
    hook->file = fopen(hook->path, hook->append ? "a" : "w");
    if (hook->file == NULL) return trace_io_error(hook, "cannot open trace file");
    /* pending is the buffer; unbuffered, a flush is one write(2) of whole lines. */
    setvbuf(hook->file, NULL, _IONBF, 0);
  }

  hook->events_seen += 1;
  if (checkpoint_event) {
    rh_Error* error = trace_checkpoint_state(hook, args);
    if (error != NULL) return error;
  }

  line_start = hook->pending_size;
  if (hook->pending_lines == 0 && timespec_get(&hook->oldest_pending, TIME_UTC) != TIME_UTC) {
    hook->oldest_pending.tv_sec = 0; /* no clock: flush_lines and the events still flush */
    hook->oldest_pending.tv_nsec = 0;
  }
  if (name != NULL) {
    failed |= trace_appendf(hook, "%s", name);
  } else {
    failed |= trace_appendf(hook, "event_%d", (int)args->event);
  }
  failed |= trace_appendf(hook, " mode=%s epoch=%lld iter=%lld inner_iter=%lld",
                          trace_mode_name(state->mode), (long long)state->epoch,
                          (long long)state->iter, (long long)state->inner_iter);
  for (i = 0; i < args->num_metrics; ++i) {
    const rh_Metric* metric = &args->metrics[i];
    failed |=
        trace_appendf(hook, " %.*s=%.6g", (int)metric->name.size, metric->name.data, metric->value);
  }
  if (args->checkpoint_dir.size > 0) {
    failed |=
        trace_appendf(hook, " dir=%.*s", (int)args->checkpoint_dir.size, args->checkpoint_dir.data);
  }
  if (checkpoint_event) {
    failed |= trace_appendf(hook, " events_seen=%llu", (unsigned long long)hook->events_seen);
  }
  failed |= trace_appendf(hook, "\n");
  if (failed) {
    hook->pending_size = line_start; /* never a part of a line */
    return trace_error(hook->host, RH_ERROR_INTERNAL, "trace hook: out of memory");
  }
  hook->pending_lines += 1;

  if (!trace_is_iteration_event(args->event) || hook->pending_lines >= hook->flush_lines ||
      trace_seconds_since(&hook->oldest_pending) >= hook->flush_seconds) {
    return trace_flush(hook);
  }
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
