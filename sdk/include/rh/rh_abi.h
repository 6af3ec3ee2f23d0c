/* rh_abi.h — the runner-host C ABI: versions, the struct_size convention,
 * strings, errors and the named values every plugin kind shares.
 *
 * Why a C ABI: plugins are shared libraries built by other people, at other
 * times, with other compilers. Nothing C++ crosses (no exceptions, RTTI, STL);
 * tensors cross as DLPack (dlpack/dlpack.h).
 *
 * Rules (docs/architecture.md §2), stated once here and relied on everywhere:
 *  - Versioning: RH_ABI_VERSION_MAJOR changes on removal/reorder/retype (the
 *    host refuses another major); MINOR changes when something is appended
 *    (the host accepts plugins built with an older or newer minor).
 *  - Every struct that crosses starts with `size_t struct_size`, set by the
 *    side that fills it to RH_<NAME>_STRUCT_SIZE of the headers it was built
 *    with. Fields are only appended. A reader treats every field that lies
 *    past the peer's struct_size as absent (RH_STRUCT_HAS).
 *  - A NULL function pointer means "not provided": the documented default.
 *  - Errors: every fallible call returns an rh_Error*; NULL means success.
 *    Errors are created through the host table (rh_HostApi::Error_Create) and
 *    destroyed by whoever receives them (rh_HostApi::Error_Destroy).
 *  - Strings are (data, size) views, never assumed NUL-terminated.
 *  - Every destroy function accepts NULL.
 *  - An entry appended from 1.11 on takes its instance (or handle) and one
 *    sized arguments struct, rh_<Entry>Args, holding its inputs and outputs,
 *    so that it grows by appending fields (docs/abi-v2.md: the plan for ABI
 *    2, where the six entries with plain arguments follow).
 *
 * CHANGELOG, one entry per minor version, written one way: `Struct: member,
 * member (why); Struct: ...` for what the version appended, `Struct: the
 * struct` for a struct it introduced, then `changed:` for what it changed
 * in the behaviour of what was there. Every appended member says
 * "ABI 1.N." first in its comment (or sits in a "---- ... (ABI 1.N) ----"
 * section), a new struct "(ABI 1.N)" in the comment above it;
 * tests/sdk/abi_changelog_check.py holds the headers and this list to each
 * other.
 *   1.0  first stable version: rh_HostApi (errors, logging, config, tensors,
 *        run state, state dicts, communicator), strategy, hook and
 *        checkpoint-IO vtables, rh_PluginInfo entry point.
 *   1.1  rh_HostApi: Checkpoint_Save, Checkpoint_Remove (hooks that decide
 *        when to checkpoint); rh_StrategyVtable: BeforeBackward.
 *   1.2  rh_ModelApi: Model_BindGrad (a gradient that lives in the
 *        strategy's memory, e.g. a bucket: no copy back after reducing).
 *   1.3  rh_SetupEnvArgs: rank_device (the host's one rule for a rank's
 *        CUDA device), local_world_size, node_rank; rh_CreateArgs: job_dir;
 *        rh_ModelApi: Model_ReleaseGrad, Model_FreeParamStorage,
 *        Model_RestoreParamStorage (sharding); rh_ParamInfo: tied;
 *        rh_StrategyTraits: input_dtype (mixed precision); rh_OptimParam:
 *        full_shape, full_ndim, full_offset (shards); rh_StrategyVtable:
 *        LossScale, ShouldStep, ReduceGradNorm, UnitParams.
 *        changed: rh_ModelApi's Model_SetParamData and Model_AddUnitCallback
 *        implemented; rh_StrategyTraits.sharded_checkpoint honoured.
 *   1.4  rh_StrategyTraits: sharded_model_state (trainable parameters saved
 *        and resumed as each rank's shards: FSDP's sharded state dict),
 *        load_from_root (only rank 0 reads a model file; UnitParams
 *        ROOT_PREPARE / ROOT_ADOPT hand each rank its shards).
 *   1.5  rh_CheckpointIoVtable: LoadSlices (a rank reads only the ranges of
 *        stored shards it needs: resharding); rh_CheckpointSlice: the struct.
 *   1.6  rh_HostApi: CheckpointIo_Create, CheckpointIo_Destroy,
 *        CheckpointIo_Save, CheckpointIo_Load, CheckpointIo_Verify,
 *        CheckpointIo_Flush, CheckpointIo_LoadSlices (a checkpoint-IO
 *        component that wraps another); rh_CheckpointIoVtable:
 *        SavesInBackground (the host publishes the checkpoint in the
 *        background).
 *        changed: rh_CheckpointIoVtable's LoadSlices may answer
 *        RH_ERROR_UNIMPLEMENTED.
 *   1.7  rh_HostApi: StateDict_AllocTensor (a checkpoint-IO plugin reads a
 *        file straight into the tensor's memory, a model parameter's when
 *        the host places it there), StateDict_SetChecksum (the CRC-32 the
 *        plugin computed while writing goes into meta.json).
 *   1.8  rh_StrategyTraits: precision_keys (a strategy that computes in a
 *        precision of its own says so; the host's AmpOptimWrapper is refused
 *        beside it).
 *        changed: rh_HostApi's Stream_Current provided on CUDA (the stream
 *        LibTorch queues the rank's work on, never NULL on a GPU);
 *        rh_ParamInfo.unit is -1 for a parameter no unit declares (was 0);
 *        RH_REDUCE_AVG divides each rank's values by the world size, then
 *        sums, as ddp averages its gradients (it summed, then divided).
 *   1.9  rh_StrategyVtable: EstimateMemory (`runner-host --estimate-memory`:
 *        a strategy says what a rank keeps, without the model); rh_ParamSize:
 *        the struct; rh_MemoryEstimateArgs: the struct; rh_MemoryEstimate:
 *        the struct.
 *   1.10 rh_MemoryEstimate: backward_grad_bytes (the gradients that exist
 *        only from backward to zero_grad, which the host weighs against the
 *        activations backward frees instead of adding them).
 *   1.11 rh_StrategyVtable: TensorParallelPlan (a strategy splits modules
 *        over tensor-parallel groups; the host's models run the plan);
 *        rh_TensorParallelStyle: the enum; rh_TensorParallelRule: the
 *        struct; rh_TensorParallelPlanArgs: the struct.
 *   1.12 rh_TensorParallelStyle: RH_TP_SEQUENCE (sequence parallelism for
 *        the norms; a 1.11 host refuses the value by name).
 */
#ifndef RH_ABI_H_
#define RH_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RH_ABI_VERSION_MAJOR 1
#define RH_ABI_VERSION_MINOR 12

/* Size of `type` up to and including `last_field`: the struct_size constant
 * of each public struct is derived from its last field, so appending a field
 * and forgetting to move the constant is caught by a static assert. */
#define RH_STRUCT_SIZE(type, last_field) \
  (offsetof(type, last_field) + sizeof(((type*)0)->last_field))

/* True when `ptr` (a struct of `type` filled by a peer) is big enough to
 * contain `field`. Use before reading any field appended after 1.0. */
#define RH_STRUCT_HAS(ptr, type, field) ((ptr)->struct_size >= RH_STRUCT_SIZE(type, field))

#if defined(__cplusplus)
#define RH_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define RH_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* Symbol visibility for the one exported entry point of a plugin. */
#if defined(_WIN32)
#define RH_EXPORT __declspec(dllexport)
#else
#define RH_EXPORT __attribute__((visibility("default")))
#endif

/* A string view: `data` need not be NUL-terminated; `size` bytes, UTF-8.
 * Who owns `data` is stated at every field or parameter of this type. */
typedef struct rh_StringView {
  const char* data;
  size_t size;
} rh_StringView;

/* Static initializer from a string literal: rh_StringView s = RH_STR("x"); */
#define RH_STR(literal) \
  { (literal), sizeof(literal) - 1 }

/* Error codes. Values are fixed forever; new codes are appended. */
typedef enum rh_ErrorCode {
  RH_ERROR_OK = 0,                  /* never carried by an rh_Error */
  RH_ERROR_INTERNAL = 1,            /* a bug or an unexpected failure */
  RH_ERROR_INVALID_ARGUMENT = 2,    /* a bad argument or call sequence */
  RH_ERROR_INVALID_CONFIG = 3,      /* a bad key or value in the job file */
  RH_ERROR_NOT_FOUND = 4,           /* file, key or name does not exist */
  RH_ERROR_UNIMPLEMENTED = 5,       /* valid request this component can't do */
  RH_ERROR_IO = 6,                  /* file system or network failure */
  RH_ERROR_TIMEOUT = 7,             /* a collective or wait ran past its limit */
  RH_ERROR_CANCELLED = 8,           /* stopped by a signal or another rank */
  RH_ERROR_DATA_LOSS = 9,           /* truncated or corrupted data detected */
  RH_ERROR_FAILED_PRECONDITION = 10 /* state does not allow the call */
} rh_ErrorCode;

/* Opaque error object, created by the host (rh_HostApi::Error_Create).
 * Ownership passes to whoever receives it; destroy with Error_Destroy. */
typedef struct rh_Error rh_Error;

/* The three kinds of component a plugin can provide. */
typedef enum rh_ComponentKind {
  RH_COMPONENT_STRATEGY = 1,     /* vtable: rh_StrategyVtable (rh_strategy.h) */
  RH_COMPONENT_HOOK = 2,         /* vtable: rh_HookVtable (rh_hook.h) */
  RH_COMPONENT_CHECKPOINT_IO = 3 /* vtable: rh_CheckpointIoVtable (rh_ckpt_io.h) */
} rh_ComponentKind;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_ABI_H_ */
