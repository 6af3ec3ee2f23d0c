/* rh_hook.h — lifecycle hooks: code that runs at fixed points of a run.
 *
 * A hook observes the run (logging, metrics export, tracing) and may act at
 * its fixed points (checkpointing). The host owns the lifecycle (DESIGN.md §3)
 * and calls each hook instance at the events it subscribed to, in ascending
 * priority (0 = first, 100 = last; equal priorities keep the job file order),
 * on every rank and for every strategy.
 *
 * Who calls what: the host calls every function below; the plugin implements
 * them. Create and OnEvent are required; the rest are optional.
 */
#ifndef RH_HOOK_H_
#define RH_HOOK_H_

#include "rh/rh_host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Events. Values are fixed forever; a later minor version adds events with
 * values >= RH_EVENT_COUNT_V1 (at most 64 in ABI 1: masks are 64-bit).
 * Bit i of an event mask stands for event i. */
typedef enum rh_HookEvent {
  RH_EVENT_BEFORE_RUN = 0,
  RH_EVENT_AFTER_RUN = 1,
  RH_EVENT_BEFORE_TRAIN = 2,
  RH_EVENT_AFTER_TRAIN = 3,
  RH_EVENT_BEFORE_TRAIN_EPOCH = 4,
  RH_EVENT_AFTER_TRAIN_EPOCH = 5,
  RH_EVENT_BEFORE_TRAIN_ITER = 6,
  RH_EVENT_AFTER_TRAIN_ITER = 7,
  RH_EVENT_BEFORE_VAL = 8,
  RH_EVENT_AFTER_VAL = 9,
  RH_EVENT_BEFORE_VAL_EPOCH = 10,
  RH_EVENT_AFTER_VAL_EPOCH = 11,
  RH_EVENT_BEFORE_VAL_ITER = 12,
  RH_EVENT_AFTER_VAL_ITER = 13,
  RH_EVENT_BEFORE_TEST = 14,
  RH_EVENT_AFTER_TEST = 15,
  RH_EVENT_BEFORE_TEST_EPOCH = 16,
  RH_EVENT_AFTER_TEST_EPOCH = 17,
  RH_EVENT_BEFORE_TEST_ITER = 18,
  RH_EVENT_AFTER_TEST_ITER = 19,
  RH_EVENT_BEFORE_SAVE_CHECKPOINT = 20,
  RH_EVENT_AFTER_SAVE_CHECKPOINT = 21,
  RH_EVENT_AFTER_LOAD_CHECKPOINT = 22,
  RH_EVENT_COUNT_V1 = 23 /* number of events defined by ABI 1.0 */
} rh_HookEvent;

#define RH_EVENT_BIT(event) (UINT64_C(1) << (event))
#define RH_EVENT_MASK_ALL UINT64_MAX

/* Named priority levels (MMEngine's scale). */
#define RH_PRIORITY_HIGHEST 0
#define RH_PRIORITY_VERY_HIGH 10
#define RH_PRIORITY_HIGH 30
#define RH_PRIORITY_ABOVE_NORMAL 40
#define RH_PRIORITY_NORMAL 50
#define RH_PRIORITY_BELOW_NORMAL 60
#define RH_PRIORITY_LOW 70
#define RH_PRIORITY_VERY_LOW 90
#define RH_PRIORITY_LOWEST 100

/* What an event carries. Borrowed for the duration of OnEvent. */
typedef struct rh_HookEventArgs {
  size_t struct_size;
  rh_HookEvent event;
  const rh_RunState* state; /* counters at the event; never NULL */
  const rh_Metric* metrics; /* after_*_iter: loss, lr...; after_*_epoch of
                               val/test: the loop's metrics; else NULL */
  size_t num_metrics;
  /* before_save_checkpoint: a dict for this hook instance's own state, saved
   * with the checkpoint (the host namespaces it per hook instance, so keys
   * need no prefix). after_load_checkpoint: the same dict as it was saved
   * (empty when the checkpoint has none for this hook). Otherwise NULL. */
  rh_StateDict* checkpoint;
  rh_StringView checkpoint_dir; /* save/load events: the directory; else empty */
} rh_HookEventArgs;
#define RH_HOOK_EVENT_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_HookEventArgs, checkpoint_dir)

typedef struct rh_HookInstance rh_HookInstance; /* opaque, owned by the plugin */

typedef struct rh_HookVtable {
  size_t struct_size;
  /* Required. Creates an instance from args->config. On success *out is owned
   * by the host until it calls Destroy; on error *out is ignored. */
  rh_Error* (*Create)(const rh_CreateArgs* args, rh_HookInstance** out);
  /* Optional. Frees the instance. Accepts NULL. */
  void (*Destroy)(rh_HookInstance* instance);
  /* Optional. Events this instance wants (RH_EVENT_BIT mask). NULL = all.
   * Called once after Create. */
  uint64_t (*EventMask)(const rh_HookInstance* instance);
  /* Optional. Default priority 0..100 (a `priority:` key in the job file
   * overrides it). NULL = RH_PRIORITY_NORMAL. Called once after Create. */
  int32_t (*Priority)(const rh_HookInstance* instance);
  /* Required. Handles one event. An error stops the run (the host reports it
   * with the hook's name and the event). */
  rh_Error* (*OnEvent)(rh_HookInstance* instance, const rh_HookEventArgs* args);
} rh_HookVtable;
#define RH_HOOK_VTABLE_STRUCT_SIZE RH_STRUCT_SIZE(rh_HookVtable, OnEvent)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_HOOK_H_ */
