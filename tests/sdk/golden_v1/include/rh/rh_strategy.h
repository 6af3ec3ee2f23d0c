/* rh_strategy.h — distributed strategies: where parameters live and when to
 * communicate.
 *
 * The host owns the torch model, autograd, the optimizer and the schedulers
 * and runs one documented lifecycle (DESIGN.md §3). A strategy declares the
 * few points where it differs (rh_StrategyTraits) and implements the steps
 * that are its own: setting up the process environment, wrapping the model
 * (registering gradient and unit callbacks, replacing parameter storage with
 * shards), handing the optimizer its parameters, synchronising gradients,
 * and exporting/importing its state for checkpoints.
 *
 * Who calls what: the host calls every function of rh_StrategyVtable, in the
 * lifecycle's order; the plugin implements them. The strategy calls the
 * rh_ModelApi functions (implemented by the host) on the model it is given.
 */
#ifndef RH_STRATEGY_H_
#define RH_STRATEGY_H_

#include "rh/rh_host.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- The model as a strategy sees it (implemented by the host) ---------- */

/* When model weights are loaded (load_from / resume) relative to Wrap. */
typedef enum rh_LoadPhase {
  RH_LOAD_BEFORE_WRAP = 0, /* full weights into the plain model (ddp, single) */
  RH_LOAD_AFTER_WRAP = 1   /* through the strategy (sharding strategies) */
} rh_LoadPhase;

/* Unit callback phases. A unit is a block the model declares (embedding,
 * each transformer block, head); sharding strategies gather per unit. */
typedef enum rh_UnitPhase {
  RH_UNIT_PRE_FORWARD = 0,
  RH_UNIT_POST_FORWARD = 1,
  RH_UNIT_PRE_BACKWARD = 2,
  RH_UNIT_POST_BACKWARD = 3
} rh_UnitPhase;

typedef struct rh_ParamInfo {
  size_t struct_size;        /* set by the caller */
  rh_StringView name;        /* e.g. "blocks.0.attn.qkv.weight"; owned by the model */
  rh_StringView module_path; /* e.g. "blocks.0.attn.qkv"; owned by the model */
  int32_t requires_grad;     /* 0 for frozen parameters */
  int32_t unit;              /* index of the unit owning it, 0..num_units-1 */
  /* View of the parameter's current data. Borrowed: valid until the next
   * Model_SetParamData on this parameter or the end of the run. */
  DLManagedTensor* data;
} rh_ParamInfo;
#define RH_PARAM_INFO_STRUCT_SIZE RH_STRUCT_SIZE(rh_ParamInfo, data)

/* Called when parameter `index`'s gradient for this backward is complete.
 * Runs on the autograd thread; must not call collectives synchronously. */
typedef void (*rh_GradReadyFn)(void* user_data, size_t param_index);
/* Called at a unit's phase; an error aborts the step. */
typedef rh_Error* (*rh_UnitFn)(void* user_data, int32_t unit, rh_UnitPhase phase);

typedef struct rh_ModelApi {
  size_t struct_size;
  size_t (*Model_NumParams)(const rh_Model* model);
  /* Fills *out for parameter `index` (registration order). */
  rh_Error* (*Model_GetParam)(rh_Model* model, size_t index, rh_ParamInfo* out);
  /* Borrowed view of the gradient, *out = NULL when it has none yet. Valid
   * until the optimizer's zero_grad or the end of the run. */
  rh_Error* (*Model_GetGrad)(rh_Model* model, size_t index, DLManagedTensor** out);
  /* Replaces the gradient's values with `grad` (same shape as the current
   * data; borrowed for the call, copied). */
  rh_Error* (*Model_SetGrad)(rh_Model* model, size_t index, const DLManagedTensor* grad);
  /* Replaces the parameter's storage (shape may change: a shard). Ownership
   * of `data` passes to the host on success. Autograd keeps the identity. */
  rh_Error* (*Model_SetParamData)(rh_Model* model, size_t index, DLManagedTensor* data);
  size_t (*Model_NumBuffers)(const rh_Model* model);
  /* Same lifetime rules as Model_GetParam; unit/requires_grad are 0. */
  rh_Error* (*Model_GetBuffer)(rh_Model* model, size_t index, rh_ParamInfo* out);
  size_t (*Model_NumUnits)(const rh_Model* model);
  /* Name of unit `index`; owned by the model. */
  rh_StringView (*Model_UnitName)(const rh_Model* model, int32_t unit);
  /* Registers fn for parameter `index`; user_data is borrowed until the end
   * of the run. Call from Wrap only. */
  rh_Error* (*Model_AddGradReadyCallback)(rh_Model* model, size_t index, rh_GradReadyFn fn,
                                          void* user_data);
  /* Registers fn for `unit` at `phase`. Call from Wrap only. */
  rh_Error* (*Model_AddUnitCallback)(rh_Model* model, int32_t unit, rh_UnitPhase phase,
                                     rh_UnitFn fn, void* user_data);
} rh_ModelApi;
#define RH_MODEL_API_STRUCT_SIZE RH_STRUCT_SIZE(rh_ModelApi, Model_AddUnitCallback)

/* ---- Strategy plugin --------------------------------------------------- */

typedef struct rh_StrategyInstance rh_StrategyInstance; /* owned by the plugin */

/* What makes this strategy's lifecycle differ. Filled by GetTraits; the host
 * sets struct_size and pre-fills every field with its default below. */
typedef struct rh_StrategyTraits {
  size_t struct_size;
  rh_LoadPhase load_phase;    /* default RH_LOAD_BEFORE_WRAP */
  int32_t needs_comm;         /* 1: needs the world communicator (default 0) */
  int32_t sharded_checkpoint; /* 1: every rank writes its own shard (default 0) */
} rh_StrategyTraits;
#define RH_STRATEGY_TRAITS_STRUCT_SIZE RH_STRUCT_SIZE(rh_StrategyTraits, sharded_checkpoint)

/* SetupEnv: rendezvous is done; choose the device, seed the generators. */
typedef struct rh_SetupEnvArgs {
  size_t struct_size;
  rh_Comm* world;     /* the world communicator, NULL in one process */
  int32_t local_rank; /* rank on this node */
  uint64_t seed;      /* the job's seed (already offset if diff_rank_seed) */
  DLDevice device;    /* in: {kDLCPU, 0}; out: the device this rank computes on */
} rh_SetupEnvArgs;
#define RH_SETUP_ENV_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_SetupEnvArgs, device)

/* Wrap: the model is built and initialised on every rank. */
typedef struct rh_WrapArgs {
  size_t struct_size;
  rh_Model* model;              /* owned by the host, valid until the end of the run */
  const rh_ModelApi* model_api; /* owned by the host, valid until exit */
} rh_WrapArgs;
#define RH_WRAP_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_WrapArgs, model_api)

/* One tensor the optimizer updates. */
typedef struct rh_OptimParam {
  size_t struct_size;
  rh_StringView name; /* parameter name (paramwise_cfg matches it); copied */
  /* The values the optimizer updates in place. Ownership passes to the host
   * (it calls the deleter when the optimizer is destroyed). */
  DLManagedTensor* param;
  /* Where the strategy leaves this tensor's gradient before each step; same
   * shape as `param`. Ownership passes to the host. */
  DLManagedTensor* grad;
} rh_OptimParam;
#define RH_OPTIM_PARAM_STRUCT_SIZE RH_STRUCT_SIZE(rh_OptimParam, grad)

/* Sink for OptimizerParams: the strategy calls add() once per tensor. */
typedef struct rh_OptimParamSink {
  size_t struct_size;
  void* user_data; /* pass back to add */
  rh_Error* (*add)(void* user_data, const rh_OptimParam* param);
} rh_OptimParamSink;
#define RH_OPTIM_PARAM_SINK_STRUCT_SIZE RH_STRUCT_SIZE(rh_OptimParamSink, add)

typedef struct rh_StrategyVtable {
  size_t struct_size;
  /* Required. Creates an instance from args->config (the `strategy:` map). */
  rh_Error* (*Create)(const rh_CreateArgs* args, rh_StrategyInstance** out);
  /* Optional. Frees the instance. Accepts NULL. */
  void (*Destroy)(rh_StrategyInstance* instance);
  /* Optional. NULL = every trait at its default. */
  void (*GetTraits)(const rh_StrategyInstance* instance, rh_StrategyTraits* out);
  /* Required. Lifecycle step 2. */
  rh_Error* (*SetupEnv)(rh_StrategyInstance* instance, rh_SetupEnvArgs* args);
  /* Optional. Lifecycle step 5. NULL = the model is used as built. */
  rh_Error* (*Wrap)(rh_StrategyInstance* instance, const rh_WrapArgs* args);
  /* Optional. Lifecycle step 7. NULL = every parameter with requires_grad,
   * as the model holds it. */
  rh_Error* (*OptimizerParams)(rh_StrategyInstance* instance, const rh_OptimParamSink* sink);
  /* Optional. After backward, before gradient clipping and the optimizer
   * step: make the optimizer's gradients complete (wait for buckets,
   * average). `sync` is 0 on gradient-accumulation steps that must not
   * communicate. NULL = nothing to do. */
  rh_Error* (*SyncGradients)(rh_StrategyInstance* instance, int32_t sync);
  /* Optional. After the optimizer step (e.g. all-gather updated shards). */
  rh_Error* (*AfterOptimizerStep)(rh_StrategyInstance* instance);
  /* Optional. Writes the strategy's own state (e.g. its shard layout) into
   * `dict`, borrowed for the call. */
  rh_Error* (*StateExport)(rh_StrategyInstance* instance, rh_StateDict* dict);
  /* Optional. Reads back what StateExport wrote; `dict` borrowed. */
  rh_Error* (*StateImport)(rh_StrategyInstance* instance, const rh_StateDict* dict);
  /* Optional. Lifecycle step 13: last call before Destroy. */
  rh_Error* (*Teardown)(rh_StrategyInstance* instance);
} rh_StrategyVtable;
#define RH_STRATEGY_VTABLE_STRUCT_SIZE RH_STRUCT_SIZE(rh_StrategyVtable, Teardown)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_STRATEGY_H_ */
