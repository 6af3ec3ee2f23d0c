/* rh_strategy.h — distributed strategies: where parameters live and when to
 * communicate.
 *
 * The host owns the torch model, autograd, the optimizer and the schedulers
 * and runs one documented lifecycle (docs/architecture.md §3). A strategy declares the
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
  /* Index of the unit owning it, 0..num_units-1; -1 (1.8) for a parameter
   * no unit declares (the model's root: used outside every unit; a 1.7
   * host said 0). Buffers: 0. */
  int32_t unit;
  /* View of the parameter's current data. Borrowed: valid until the next
   * Model_SetParamData on this parameter or the end of the run. */
  DLManagedTensor* data;
  /* ABI 1.3. 1 when units other than `unit` use this parameter too (tied
   * weights: gpt's tie_weights makes the head multiply by the embedding). A
   * sharding strategy keeps such a parameter whole while any unit runs. */
  int32_t tied;
} rh_ParamInfo;
#define RH_PARAM_INFO_STRUCT_SIZE RH_STRUCT_SIZE(rh_ParamInfo, tied)

/* Called when parameter `index`'s gradient for this backward is complete:
 * autograd has accumulated this backward's contribution into the gradient,
 * so inside an accumulation window it holds the sum over the window's
 * micro-batches so far. Runs on the autograd thread; must not call
 * collectives synchronously. It returns nothing, so it cannot fail: a
 * strategy records what went wrong (as ddp does) and returns the error from
 * its next entry that can (SyncGradients), which stops the step on every
 * rank with the message. */
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
  /* Replaces the parameter's data with `data` (1.3: implemented). The shape
   * must stay (autograd recorded it when the gradient accumulator was made;
   * to hold only a shard, free the storage instead: Model_FreeParamStorage);
   * the dtype and device may change (working parameters in bf16) only
   * before any gradient-ready callback is registered on it. Ownership of
   * `data` passes to the host on success; on error it stays with the
   * caller. The parameter keeps its identity (optimizer, autograd). Call
   * from Wrap only. */
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
  /* Registers fn for `unit` at `phase` (1.3: implemented). PRE_FORWARD /
   * POST_FORWARD run around the unit's forward (an opaque TorchScript
   * forward: every unit before / after it, in order), also without grad
   * mode (validation). PRE_BACKWARD runs before autograd enters the unit's
   * backward (a hook on its output's gradient; not at all when its output
   * needs no gradient). POST_BACKWARD runs once per backward, when every
   * parameter of the unit that requires grad has its gradient, and for the
   * units whose parameters received none, when backward returns; units
   * without any trainable parameter get it when backward returns.
   * user_data is borrowed until the end of the run. Call from Wrap only. */
  rh_Error* (*Model_AddUnitCallback)(rh_Model* model, int32_t unit, rh_UnitPhase phase,
                                     rh_UnitFn fn, void* user_data);
  /* ABI 1.2. Makes `grad` the parameter's gradient itself, not a copy: what the
   * strategy later writes to that memory is the gradient (a data-parallel
   * strategy binds each gradient to its slice of a bucket, so the reduced
   * values need no copy back). Same shape, dtype and device as the
   * parameter. Ownership of `grad` passes to the host on success (its deleter
   * runs when the gradient is dropped, e.g. by zero_grad); on error it stays
   * with the caller. May be called from a grad-ready callback. */
  rh_Error* (*Model_BindGrad)(rh_Model* model, size_t index, DLManagedTensor* grad);
  /* ABI 1.3. Drops the parameter's gradient now (as zero_grad does): a
   * sharding strategy that has copied it into a bucket releases the full
   * gradient before the next one is computed. May be called from a
   * grad-ready callback. */
  rh_Error* (*Model_ReleaseGrad)(rh_Model* model, size_t index);
  /* ABI 1.3. Frees the memory of the parameter's data (its storage is resized
   * to 0 bytes) while the tensor, its shape and what autograd saved of it
   * stay: a sharded parameter between uses. Views from Model_GetParam show
   * no memory until Model_RestoreParamStorage. */
  rh_Error* (*Model_FreeParamStorage)(rh_Model* model, size_t index);
  /* ABI 1.3. Gives the freed storage its memory back (values undefined: the
   * strategy fills it through a new Model_GetParam view) before the
   * parameter is used again: forward, or the backward that saved it. No-op
   * when not freed. */
  rh_Error* (*Model_RestoreParamStorage)(rh_Model* model, size_t index);
} rh_ModelApi;
#define RH_MODEL_API_STRUCT_SIZE RH_STRUCT_SIZE(rh_ModelApi, Model_RestoreParamStorage)

/* ---- Strategy plugin --------------------------------------------------- */

typedef struct rh_StrategyInstance rh_StrategyInstance; /* owned by the plugin */

/* What makes this strategy's lifecycle differ. Filled by GetTraits; the host
 * sets struct_size and pre-fills every field with its default below. */
typedef struct rh_StrategyTraits {
  size_t struct_size;
  rh_LoadPhase load_phase; /* default RH_LOAD_BEFORE_WRAP */
  int32_t needs_comm;      /* 1: needs the world communicator (default 0) */
  /* 1: every rank writes its optimizer state (and the values of the tensors
   * OptimizerParams gave) to a file of its own, optimizer.rank<r>; rank 0
   * still writes the full model, gathering each unit through UnitParams.
   * Needs OptimizerParams (default 0). */
  int32_t sharded_checkpoint;
  /* ABI 1.3. Floating-point inputs are cast to this dtype before forward
   * (DeepSpeed's inputs_to_half); {0, 0, 0} (default): left as loaded. The
   * host always computes the loss in float32. */
  DLDataType input_dtype;
  /* ABI 1.4. 1: the trainable parameters are saved only as the shards
   * OptimizerParams gives (their values, `<name>.param`, in each rank's
   * optimizer.rank<r>; FSDP's sharded state dict): rank 0's model file holds
   * the rest (frozen parameters, buffers) and meta.json marks them
   * "sharded". On resume the host restores those values into the optimizer's
   * tensors before StateImport, where the strategy rebuilds its parameters
   * from them. Needs sharded_checkpoint (default 0: the full model is
   * gathered for rank 0). */
  int32_t sharded_model_state;
  /* ABI 1.4. 1: when a model file is loaded through the strategy (load_phase
   * after_wrap), only rank 0 reads it: per unit the host calls UnitParams
   * ROOT_PREPARE, writes the whole values on rank 0, then ROOT_ADOPT, where
   * every rank receives its shards of rank 0's values (the host broadcasts
   * the buffers). Used when rank 0 finds every tensor of the model in the
   * file; otherwise (load_from strict: false with tensors missing) every
   * rank reads it and GATHER / ADOPT are used. Needs UnitParams (default 0). */
  int32_t load_from_root;
  /* ABI 1.8. The settings of this strategy's own config (under `strategy:`)
   * that make it compute in a precision of its own (working parameters or
   * inputs in bf16/fp16, its own loss scaling), as "key: value" text, e.g.
   * "bf16.enabled: true" or "mixed_precision.param_dtype: bfloat16"; empty
   * (default) when it computes in the parameters' float32. The host refuses
   * optim_wrapper type AmpOptimWrapper (its own autocast and loss scaling)
   * beside a strategy that names any, quoting them. Owned by the strategy
   * instance, valid until it is destroyed. */
  rh_StringView precision_keys;
} rh_StrategyTraits;
#define RH_STRATEGY_TRAITS_STRUCT_SIZE RH_STRUCT_SIZE(rh_StrategyTraits, precision_keys)

/* SetupEnv: rendezvous is done; choose the device. The host has already
 * seeded LibTorch's generators with `seed` (CPU, and CUDA when present);
 * a strategy seeds only generators of its own. */
typedef struct rh_SetupEnvArgs {
  size_t struct_size;
  rh_Comm* world;     /* the world communicator, NULL in one process */
  int32_t local_rank; /* rank on this node */
  uint64_t seed;      /* the job's seed (already offset if diff_rank_seed) */
  DLDevice device;    /* in: {kDLCPU, 0}; out: the device this rank computes on */
  /* ABI 1.3. The device the host assigns this rank when it computes on a GPU:
   * {kDLCUDA, i} by the host's one rule (one visible GPU -> 0, else the local
   * rank), the device the nccl communicator uses; {kDLCPU, 0} when no GPU is
   * visible. A strategy that runs on CUDA should return it in `device`. */
  DLDevice rank_device;
  int32_t local_world_size; /* ABI 1.3. ranks on this node */
  int32_t node_rank;        /* ABI 1.3. this node's index, 0-based */
} rh_SetupEnvArgs;
#define RH_SETUP_ENV_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_SetupEnvArgs, node_rank)

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
  /* The model parameter it holds (a shard of) — its name as Model_GetParam
   * gives it: paramwise_cfg applies by it, with full_shape as the
   * parameter's shape (a name that is no parameter is refused when the job
   * has paramwise_cfg); checkpoints store its state under it. Copied. */
  rh_StringView name;
  /* The values the optimizer updates in place. Ownership passes to the host
   * with the add() call, also when it fails (the host calls the deleter when
   * the optimizer is destroyed, or at once on failure). It may alias the
   * model parameter (a view of Model_GetParam's tensor, or a range of it):
   * the step then updates the model in place, and nothing else is needed. */
  DLManagedTensor* param;
  /* Where the strategy leaves this tensor's gradient before each step
   * (SyncGradients); same shape, dtype and device as `param`. The host binds
   * it, without a copy, as the gradient the optimizer reads, and never zeroes
   * it: the strategy owns its values. Ownership passes to the host as for
   * `param`. It must be the strategy's own memory, not a view of a model
   * parameter's gradient: the host drops those after each step (set to
   * none), so such a view would go stale. */
  DLManagedTensor* grad;
  /* ABI 1.3. When `param` is a shard: the shape of the whole parameter `name`
   * (borrowed for the add() call, copied; NULL = `param` is the whole
   * parameter) and where the shard starts in its flattened elements (the
   * shard is elements [full_offset, full_offset + numel) of it, row-major).
   * Checkpoints record it beside the shard's optimizer state. */
  const int64_t* full_shape;
  int32_t full_ndim;   /* ABI 1.3. the dimensions of full_shape */
  int64_t full_offset; /* ABI 1.3. the shard's first element in the whole */
} rh_OptimParam;
#define RH_OPTIM_PARAM_STRUCT_SIZE RH_STRUCT_SIZE(rh_OptimParam, full_offset)

/* Sink for OptimizerParams: the strategy calls add() once per tensor. */
typedef struct rh_OptimParamSink {
  size_t struct_size;
  void* user_data; /* pass back to add */
  rh_Error* (*add)(void* user_data, const rh_OptimParam* param);
} rh_OptimParamSink;
#define RH_OPTIM_PARAM_SINK_STRUCT_SIZE RH_STRUCT_SIZE(rh_OptimParamSink, add)

/* UnitParams operations: the host reads or writes whole parameters of a
 * sharded model (checkpoints, load_from) one unit at a time. */
typedef enum rh_UnitParamsOp {
  RH_UNIT_PARAMS_RELEASE = 0, /* done reading: reshard (values unchanged) */
  RH_UNIT_PARAMS_GATHER = 1,  /* make every parameter of the unit whole */
  RH_UNIT_PARAMS_ADOPT = 2,   /* the host wrote new whole values: take them, reshard */
  /* 1.4, only to a strategy with the load_from_root trait: */
  /* rank 0 is about to write the unit's whole values: give its parameters
   * memory there (values undefined); no communication */
  RH_UNIT_PARAMS_ROOT_PREPARE = 3,
  /* rank 0 wrote them: every rank takes its shards of rank 0's values and
   * reshards; parameters whole on every rank (frozen, ignored) are
   * broadcast from rank 0 */
  RH_UNIT_PARAMS_ROOT_ADOPT = 4
} rh_UnitParamsOp;

/* ---- Memory estimate (ABI 1.9) ------------------------------------------ */

/* One parameter as EstimateMemory sees it (ABI 1.9): `runner-host
 * --estimate-memory` does not allocate the model, so there is no tensor,
 * only its size. */
typedef struct rh_ParamSize {
  size_t struct_size;    /* set by the host */
  rh_StringView name;    /* as rh_ParamInfo.name; owned by the host, valid for the call */
  int64_t numel;         /* elements of the whole parameter */
  int64_t rows;          /* its first dimension (1 for a 0-d parameter): dim-0 shards */
  int32_t element_size;  /* bytes per element as built (4: float32) */
  int32_t unit;          /* as rh_ParamInfo.unit: 0..num_units-1, -1 for none */
  int32_t requires_grad; /* 0 for frozen parameters */
  int32_t tied;          /* as rh_ParamInfo.tied */
} rh_ParamSize;
#define RH_PARAM_SIZE_STRUCT_SIZE RH_STRUCT_SIZE(rh_ParamSize, tied)

/* What EstimateMemory is asked about (ABI 1.9): the model's parameters by
 * size and the job's world, one rank at a time. */
typedef struct rh_MemoryEstimateArgs {
  size_t struct_size;
  const rh_ParamSize* params; /* the model's parameters in order; borrowed for the call */
  size_t num_params;
  int32_t num_units;
  int32_t world_size; /* the ranks of the job it estimates, not of this process */
  int32_t rank;       /* the rank estimated, 0..world_size-1 */
  int32_t local_world_size;
  /* Backward passes per optimizer step (optim_wrapper.accumulative_counts,
   * 1 without accumulation): gradients a strategy keeps through the window. */
  int32_t accumulation;
  uint64_t buffer_bytes; /* the model's buffers (batch-norm statistics), as built */
} rh_MemoryEstimateArgs;
#define RH_MEMORY_ESTIMATE_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_MemoryEstimateArgs, buffer_bytes)

/* What `rank` keeps at the peak of an iteration (ABI 1.9: forward,
 * backward, optimizer step), in bytes unless named otherwise; the host sets
 * struct_size and zeroes every field. Activations are the host's (the
 * model's forward), as is the optimizer's state per element. */
typedef struct rh_MemoryEstimate {
  size_t struct_size;
  /* Parameter storage this rank keeps between iterations (the whole model,
   * or its shards and the parameters it keeps whole). */
  uint64_t param_bytes;
  /* Gradient storage: autograd's gradients where it keeps them, buckets,
   * flat or sharded gradient buffers. */
  uint64_t grad_bytes;
  /* Elements of the tensors the host's optimizer steps on this rank (those
   * OptimizerParams gives, or every trainable parameter without it); the
   * host multiplies them by its optimizer's state per element. */
  uint64_t optimizer_elements;
  /* Bytes per element of those tensors (4: float32). */
  uint64_t optimizer_element_size;
  /* Copies of the parameters in another precision (float32 masters beside
   * bf16 working parameters, or the reverse). */
  uint64_t master_bytes;
  /* Communication buffers beyond grad_bytes (staging for reduce-scatter
   * and all-gather, bucket copies), at most at once. */
  uint64_t comm_bytes;
  /* Whole parameters gathered from shards, at most at once (zero stage 3,
   * fsdp: the units being computed and prefetched). */
  uint64_t gathered_bytes;
  /* ABI 1.10. Of grad_bytes, what exists only from backward until the
   * optimizer's zero_grad: autograd's gradients the strategy does not keep
   * (single's; ddp's waiting for their bucket; the one zero and fsdp are
   * copying), none through an accumulation window. Backward makes them as
   * it frees the activations, so the host counts the larger of the two,
   * not both. 0 (a plugin of ABI 1.9): all of grad_bytes is held through
   * forward. */
  uint64_t backward_grad_bytes;
} rh_MemoryEstimate;
#define RH_MEMORY_ESTIMATE_STRUCT_SIZE RH_STRUCT_SIZE(rh_MemoryEstimate, backward_grad_bytes)

/* ---- Tensor parallel (ABI 1.11) ------------------------------------------ */

/* How a module's weights are split over the ranks of a tensor-parallel group
 * (ABI 1.11): Megatron-LM's and torchtitan's styles, run by the host's
 * built-in models. n = the group's size, t = this rank's place in it. */
typedef enum rh_TensorParallelStyle {
  /* Whole on every rank of the group (norms; any module no rule names). */
  RH_TP_REPLICATE = 0,
  /* A linear layer's output features: rank t holds weight rows [t O/n,
   * (t+1) O/n) (and that part of the bias). Its input is whole on every
   * rank: identity forward, the input's gradient all-reduced (summed) over
   * the group in backward. Its output is this rank's features. */
  RH_TP_COLWISE = 1,
  /* A linear layer's input features: rank t holds weight columns [t I/n,
   * (t+1) I/n), reading the colwise output before it. The partial outputs
   * are all-reduced (summed) in forward, identity in backward; a bias is
   * added once, whole. */
  RH_TP_ROWWISE = 2,
  /* The vocabulary: an embedding's rows (each rank looks up the ids it
   * holds, zeros for the others, the lookups summed over the group) or an
   * output layer's rows (each rank computes its vocabulary's logits, which
   * are all-gathered; in backward each rank keeps its part of the gradient). */
  RH_TP_VOCAB = 3,
  /* ABI 1.12. A norm, with sequence parallelism (Megatron-LM's, torchtitan's
   * SequenceParallel): its weight whole on every rank, its input and output
   * sharded along the sequence (rank t: positions [t T/n, (t+1) T/n)), its
   * weight's gradient summed over the group. The activations between the
   * split blocks stay sharded so: before a colwise block they are
   * all-gathered along the sequence (the gradient reduce-scattered in
   * backward), after a rowwise one reduce-scattered (all-gathered in
   * backward) instead of all-reduced. */
  RH_TP_SEQUENCE = 4
} rh_TensorParallelStyle;

/* One rule of a plan (ABI 1.11). */
typedef struct rh_TensorParallelRule {
  size_t struct_size; /* set by the strategy */
  rh_TensorParallelStyle style;
  /* A module path as rh_ParamInfo.module_path gives it; `*` matches any run
   * of characters, dots included ("layers.*.attention.wq"). Owned by the
   * strategy instance, valid until it is destroyed. */
  rh_StringView pattern;
} rh_TensorParallelRule;
#define RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE RH_STRUCT_SIZE(rh_TensorParallelRule, pattern)

/* TensorParallelPlan's arguments (ABI 1.11; the first entry written as
 * docs/abi-v2.md's rule says: inputs and outputs in one sized struct). The
 * host sets struct_size, the inputs, size = 1 and zeroes the rest. */
typedef struct rh_TensorParallelPlanArgs {
  size_t struct_size;
  /* In: the job's model.type ("llama"). Owned by the host, for the call. */
  rh_StringView model_type;
  /* Out: the ranks of one tensor-parallel group; 1 (as pre-filled): no
   * tensor parallelism, and nothing else is read. Groups are consecutive
   * world ranks: rank r is rank r % size of group r / size, so a group lies
   * inside a node when size divides the ranks per node. size must divide
   * the world size. The ranks of one group compute on the same batch: the
   * host's data loader shards over world / size data-parallel replicas
   * (replica r / size), and a data-parallel strategy reduces over the ranks
   * with the same r % size. */
  int32_t size;
  /* Out: this rank's group (Comm_NewGroup of the world with those ranks);
   * owned by the host as every group is; not read before SetupEnv. The host issues the plan's
   * collectives on it, from forward and from backward (on the autograd
   * thread), so the strategy must issue nothing of its own on it. */
  rh_Comm* group;
  /* Out: the plan, in order; the first rule whose pattern matches a module
   * applies; a module no rule matches is replicated. Owned by the strategy
   * instance, valid until it is destroyed. A plan the model cannot run (a
   * TorchScript model, a head count the size does not divide, a style the
   * module does not have) is refused by the host, naming the rule. */
  const rh_TensorParallelRule* rules;
  size_t num_rules;
} rh_TensorParallelPlanArgs;
#define RH_TENSOR_PARALLEL_PLAN_ARGS_STRUCT_SIZE \
  RH_STRUCT_SIZE(rh_TensorParallelPlanArgs, num_rules)

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
  /* Optional. Lifecycle step 7: the tensors the optimizer updates, by name
   * (paramwise_cfg matches the names; checkpoints store their state under
   * them). NULL = every parameter with requires_grad, as the model holds it.
   * With it, optim_wrapper.clip_grad needs ReduceGradNorm (ABI 1.3; refused
   * without), and after each optimizer step the host drops the model
   * parameters' gradients (set to none), as zero_grad does without it. */
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
  /* ABI 1.1. Optional. Before each backward: `sync` is 1 when the
   * SyncGradients after this backward will synchronise (0 on gradient
   * accumulation steps), so gradient-ready callbacks know whether to
   * communicate during this backward. */
  rh_Error* (*BeforeBackward)(rh_StrategyInstance* instance, int32_t sync);
  /* ABI 1.3. Optional. Before each backward: the factor the host
   * multiplies the loss by (fp16 loss scaling). NULL = 1. The strategy
   * divides it out of its gradients (SyncGradients). */
  rh_Error* (*LossScale)(rh_StrategyInstance* instance, double* scale);
  /* ABI 1.3. Optional. After SyncGradients(sync = 1): *step = 0 skips this
   * optimizer step (an fp16 overflow on any rank); the host pre-fills 1.
   * Must answer the same on every rank. The host then neither clips nor
   * steps nor calls AfterOptimizerStep, drops the gradients, logs it once
   * and counts it (metric skipped_steps). NULL = always step. */
  rh_Error* (*ShouldStep)(rh_StrategyInstance* instance, int32_t* step);
  /* ABI 1.3. Optional. optim_wrapper.clip_grad over sharded gradients:
   * *value holds this rank's share of the norm over the optimizer's
   * gradients (of the sum of |g|^norm_type, or max |g| when norm_type is
   * inf); the strategy replaces it by the whole job's (a sum in double, or
   * max, over the ranks holding distinct shards). Collective. For norm
   * types 2 and 1 the host sums exactly and calls this once for each of the
   * sum's parts (rh/cpp/torch_exact_norm.hpp: integers below 2^40, 17 calls a
   * step, the same on every rank): a double sum over up to 2^13 ranks keeps
   * them exact, so the norm has the same bits however the gradients are
   * sharded. With OptimizerParams and no ReduceGradNorm, clip_grad is
   * refused. */
  rh_Error* (*ReduceGradNorm)(rh_StrategyInstance* instance, double norm_type, double* value);
  /* ABI 1.3. Optional. Whole parameters of `unit` (-1: the tied ones,
   * rh_ParamInfo.tied) for checkpoints and loads; collective, every
   * rank calls it with the same arguments. Required with load_phase
   * RH_LOAD_AFTER_WRAP or sharded_checkpoint. */
  rh_Error* (*UnitParams)(rh_StrategyInstance* instance, int32_t unit, rh_UnitParamsOp op);
  /* ABI 1.9. Optional. `runner-host --estimate-memory`: what args->rank of
   * a job of args->world_size ranks keeps, from the parameters' sizes and
   * the strategy's config alone. Called on an instance just created (no
   * SetupEnv, no communicator, no model): it must allocate nothing of the
   * model's size and communicate with nobody. NULL = the host says the
   * strategy does not estimate its memory and prints the model's terms. */
  rh_Error* (*EstimateMemory)(rh_StrategyInstance* instance, const rh_MemoryEstimateArgs* args,
                              rh_MemoryEstimate* out);
  /* ABI 1.11. Optional. The strategy's tensor-parallel plan
   * (rh_TensorParallelPlanArgs). Asked at step 1, before SetupEnv (the
   * host checks the plan against the model's shapes: --dry-run; `group` is
   * not read then), and again after SetupEnv: the host builds the whole
   * model, loads its weights (load_from, resume), then keeps on each rank
   * only its slices of the planned modules; Wrap, the optimizer and the
   * strategy's gradients see those slices. Must answer the same both times.
   * Beside a plan the weights load before Wrap whatever load_phase says
   * (UnitParams' load ops are not called). A strategy that shards the
   * slices (OptimizerParams) gives full_shape as the slice's shape and
   * full_offset within it; a shard of a slice split along dim d > 0
   * (RH_TP_ROWWISE) must be whole rows of it (its elements from dim d on),
   * or the host refuses it when the optimizer is built: a checkpoint holds
   * whole tensors, where such a slice's rows lie beside the other ranks'.
   * NULL = no tensor parallelism. */
  rh_Error* (*TensorParallelPlan)(rh_StrategyInstance* instance, rh_TensorParallelPlanArgs* args);
} rh_StrategyVtable;
#define RH_STRATEGY_VTABLE_STRUCT_SIZE RH_STRUCT_SIZE(rh_StrategyVtable, TensorParallelPlan)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_STRATEGY_H_ */
