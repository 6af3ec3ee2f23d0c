/* rh_host.h — the host API table: everything a plugin may ask of the host.
 *
 * The host fills one rh_HostApi and hands a pointer to it to every plugin's
 * Init and to every component's Create. The table is owned by the host and
 * valid until the process exits. A plugin keeps the pointer; it never copies
 * the struct (a newer host's table is larger than the plugin's headers know).
 *
 * Every function here is implemented by the host. Functions are thread-safe
 * unless their comment says otherwise. Errors, Log*, Config_* and
 * StateDict_* are always provided. Any other entry may be NULL, meaning this
 * host does not provide it (e.g. Comm_* in a single-process run, or a host of
 * an older minor): check before calling.
 *
 * Handles (all opaque, all owned by the host):
 *   rh_Context     one per plugin (given to Init) and one per component
 *                  instance (given to Create); names the plugin in logs and
 *                  errors. Valid until the instance is destroyed.
 *   rh_ConfigNode  a node of the job's YAML, valid while its context is.
 *   rh_StateDict   a named collection of tensors and byte blobs (checkpoint
 *                  state); borrowed for the duration of the call it arrives in.
 *   rh_Model       the host's torch model as strategies see it (rh_strategy.h).
 *   rh_Comm        a communicator: the world or a subgroup.
 *   rh_CommWork    an asynchronous collective in flight.
 */
#ifndef RH_HOST_H_
#define RH_HOST_H_

#include <dlpack/dlpack.h>

#include "rh/rh_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rh_Context rh_Context;
typedef struct rh_ConfigNode rh_ConfigNode;
typedef struct rh_StateDict rh_StateDict;
typedef struct rh_Model rh_Model;
typedef struct rh_Comm rh_Comm;
typedef struct rh_CommWork rh_CommWork;

typedef enum rh_LogLevel {
  RH_LOG_TRACE = 0,
  RH_LOG_DEBUG = 1,
  RH_LOG_INFO = 2,
  RH_LOG_WARN = 3,
  RH_LOG_ERROR = 4
} rh_LogLevel;

typedef enum rh_ConfigKind {
  RH_CONFIG_NULL = 0,     /* `key: ~` or `key:` with nothing */
  RH_CONFIG_SCALAR = 1,   /* number, bool or string: use Config_As* */
  RH_CONFIG_SEQUENCE = 2, /* use Config_Size / Config_At */
  RH_CONFIG_MAP = 3       /* use Config_Size / Config_KeyAt / Config_At / Config_Get */
} rh_ConfigKind;

typedef enum rh_ReduceOp {
  RH_REDUCE_SUM = 0,
  RH_REDUCE_AVG = 1,
  RH_REDUCE_MAX = 2,
  RH_REDUCE_MIN = 3
} rh_ReduceOp;

/* What the runner is doing. */
typedef enum rh_RunMode { RH_MODE_TRAIN = 0, RH_MODE_VAL = 1, RH_MODE_TEST = 2 } rh_RunMode;

/* Loop counters as the host sees them. The caller sets struct_size. */
typedef struct rh_RunState {
  size_t struct_size;
  rh_RunMode mode;
  int64_t epoch;      /* 0-based epoch being run (or finished at after_*) */
  int64_t iter;       /* 0-based global train iteration */
  int64_t inner_iter; /* 0-based iteration within the current epoch/loop */
  int64_t max_epochs; /* 0 when the loop is iteration based */
  int64_t max_iters;  /* total train iterations of the run */
  int32_t rank;       /* this process's global rank */
  int32_t world_size; /* number of ranks */
} rh_RunState;
#define RH_RUN_STATE_STRUCT_SIZE RH_STRUCT_SIZE(rh_RunState, world_size)

/* One named scalar (a loss, a learning rate, an accuracy). Used in arrays,
 * so it has no struct_size and is frozen for ABI 1 (as is rh_StringView). */
typedef struct rh_Metric {
  rh_StringView name; /* owned by whoever owns the array holding it */
  double value;
} rh_Metric;

typedef struct rh_HostApi {
  size_t struct_size;
  uint32_t abi_major; /* the host's RH_ABI_VERSION_MAJOR */
  uint32_t abi_minor; /* the host's RH_ABI_VERSION_MINOR */

  /* ---- Errors ---------------------------------------------------------- */
  /* New error; `message` is copied. Ownership of the result passes to the
   * caller (who usually returns it to the host). Never returns NULL. */
  rh_Error* (*Error_Create)(rh_ErrorCode code, const char* message, size_t message_size);
  /* Frees an error. Accepts NULL. */
  void (*Error_Destroy)(rh_Error* error);
  rh_ErrorCode (*Error_Code)(const rh_Error* error);
  /* The message; owned by the error, valid until Error_Destroy. */
  rh_StringView (*Error_Message)(const rh_Error* error);

  /* ---- Logging --------------------------------------------------------- */
  /* Logs through the host's logger, prefixed by the context's plugin name
   * and rank. `message` is borrowed for the call. */
  void (*Log)(rh_Context* context, rh_LogLevel level, const char* message, size_t message_size);
  /* True when a message at `level` would be printed (skip formatting if not). */
  int32_t (*Log_IsEnabled)(rh_Context* context, rh_LogLevel level);

  /* ---- Configuration (read-only view of the job's YAML) ---------------- */
  /* A component reads its own subtree (rh_CreateArgs::config). Every key the
   * component looks up with Config_Get is recorded; after Create succeeds the
   * host reports every key of the subtree that was never looked up as an
   * unknown key (with a "did you mean" from the looked-up names). */
  rh_ConfigKind (*Config_Kind)(const rh_ConfigNode* node);
  /* Child of a map by key, or NULL when absent (absent is not an error). The
   * lookup is recorded even when the key is absent. */
  const rh_ConfigNode* (*Config_Get)(const rh_ConfigNode* node, const char* key, size_t key_size);
  /* Number of items of a sequence or map; 0 for scalars and null. */
  size_t (*Config_Size)(const rh_ConfigNode* node);
  /* Item `index` of a sequence, or value `index` of a map (in file order);
   * NULL when out of range. Reaching a map value this way records its key. */
  const rh_ConfigNode* (*Config_At)(const rh_ConfigNode* node, size_t index);
  /* Key `index` of a map; empty view when out of range. Owned by the host. */
  rh_StringView (*Config_KeyAt)(const rh_ConfigNode* node, size_t index);
  /* Typed reads of a scalar. On a type mismatch the error names the file,
   * line, column and key path and says what was expected. */
  rh_Error* (*Config_AsInt)(const rh_ConfigNode* node, int64_t* out);
  rh_Error* (*Config_AsDouble)(const rh_ConfigNode* node, double* out);
  rh_Error* (*Config_AsBool)(const rh_ConfigNode* node, int32_t* out);
  /* `out` is owned by the host, valid while the node is. */
  rh_Error* (*Config_AsString)(const rh_ConfigNode* node, rh_StringView* out);
  /* Dotted key path of the node, e.g. "strategy.bucket_cap_mb". Owned by host. */
  rh_StringView (*Config_Path)(const rh_ConfigNode* node);
  /* "file:line:column" where the node was written. Owned by the host. */
  rh_StringView (*Config_Location)(const rh_ConfigNode* node);
  /* New error of code RH_ERROR_INVALID_CONFIG whose message is prefixed with
   * the node's location and key path. Ownership passes to the caller. */
  rh_Error* (*Config_Error)(const rh_ConfigNode* node, const char* message, size_t message_size);

  /* ---- Tensors and devices --------------------------------------------- */
  /* Allocates an uninitialised tensor with the host's allocator. Ownership
   * of *out passes to the caller, who frees it by calling (*out)->deleter. */
  rh_Error* (*Tensor_Alloc)(rh_Context* context, const int64_t* shape, int32_t ndim,
                            DLDataType dtype, DLDevice device, DLManagedTensor** out);
  /* The device this rank computes on (set by the strategy's SetupEnv). */
  rh_Error* (*Device_Current)(rh_Context* context, DLDevice* out);
  /* The current stream of the device (a cudaStream_t), NULL on CPU. */
  void* (*Stream_Current)(rh_Context* context);

  /* ---- Run state ------------------------------------------------------- */
  /* Fills *out (set out->struct_size first; fields past it are left alone). */
  rh_Error* (*RunState_Get)(rh_Context* context, rh_RunState* out);
  /* Reports a scalar for the current iteration; hooks see it in the metrics
   * of the next after_*_iter event. `name` is copied. */
  rh_Error* (*Metric_Put)(rh_Context* context, const char* name, size_t name_size, double value);

  /* ---- State dicts (checkpoint content) -------------------------------- */
  /* Adds a tensor under `key`; the host copies the data, `tensor` stays the
   * caller's. A key that exists is replaced. */
  rh_Error* (*StateDict_PutTensor)(rh_StateDict* dict, const char* key, size_t key_size,
                                   const DLManagedTensor* tensor);
  /* Adds bytes under `key` (copied). */
  rh_Error* (*StateDict_PutBytes)(rh_StateDict* dict, const char* key, size_t key_size,
                                  const void* data, size_t size);
  /* Borrowed view of a tensor (*out stays the host's, valid until the call
   * that handed over `dict` returns). RH_ERROR_NOT_FOUND when absent. */
  rh_Error* (*StateDict_GetTensor)(const rh_StateDict* dict, const char* key, size_t key_size,
                                   const DLManagedTensor** out);
  /* Borrowed view of bytes, same lifetime as StateDict_GetTensor. */
  rh_Error* (*StateDict_GetBytes)(const rh_StateDict* dict, const char* key, size_t key_size,
                                  rh_StringView* out);
  size_t (*StateDict_Size)(const rh_StateDict* dict);
  /* Key `index` (sorted order); owned by the dict. */
  rh_StringView (*StateDict_KeyAt)(const rh_StateDict* dict, size_t index);

  /* ---- Communicator ---------------------------------------------------- */
  /* The world communicator, or NULL in a single-process run. Owned by the
   * host, valid until the run ends. Collectives on one communicator must be
   * issued in the same order on every rank. Tensors are borrowed: for an
   * asynchronous call (work != NULL) they must stay alive and untouched until
   * CommWork_Wait returns. With work == NULL the call is synchronous. Every
   * collective fails with RH_ERROR_TIMEOUT after the job's dist.timeout_s. */
  rh_Comm* (*Comm_World)(rh_Context* context);
  int32_t (*Comm_Rank)(const rh_Comm* comm);
  int32_t (*Comm_Size)(const rh_Comm* comm);
  /* In place on `tensor`. */
  rh_Error* (*Comm_AllReduce)(rh_Comm* comm, DLManagedTensor* tensor, rh_ReduceOp op,
                              rh_CommWork** work);
  /* `output` holds Comm_Size inputs concatenated in rank order (dim 0). */
  rh_Error* (*Comm_AllGather)(rh_Comm* comm, const DLManagedTensor* input, DLManagedTensor* output,
                              rh_CommWork** work);
  /* `input` holds Comm_Size equal chunks (dim 0); rank r gets the reduction
   * of every rank's chunk r in `output`. */
  rh_Error* (*Comm_ReduceScatter)(rh_Comm* comm, const DLManagedTensor* input,
                                  DLManagedTensor* output, rh_ReduceOp op, rh_CommWork** work);
  /* In place; rank `root` (in this communicator) sends. */
  rh_Error* (*Comm_Broadcast)(rh_Comm* comm, DLManagedTensor* tensor, int32_t root,
                              rh_CommWork** work);
  rh_Error* (*Comm_Barrier)(rh_Comm* comm);
  /* A subgroup of `comm` made of `ranks` (ranks of `comm`, ascending). Every
   * rank of `comm` must call it with the same list; ranks not in the list get
   * *out == NULL. The subgroup is owned by the host. */
  rh_Error* (*Comm_NewGroup)(rh_Comm* comm, const int32_t* ranks, size_t num_ranks, rh_Comm** out);
  /* Blocks until the collective finished; returns its error if it failed. */
  rh_Error* (*CommWork_Wait)(rh_CommWork* work);
  /* Non-blocking: 1 when finished (successfully or not), 0 otherwise. */
  int32_t (*CommWork_IsCompleted)(rh_CommWork* work);
  /* Frees the handle (waits first if still running). Accepts NULL. */
  void (*CommWork_Destroy)(rh_CommWork* work);
} rh_HostApi;
#define RH_HOST_API_STRUCT_SIZE RH_STRUCT_SIZE(rh_HostApi, CommWork_Destroy)

/* Passed to every component's Create. Borrowed for the call; the pointers
 * inside stay valid until the instance is destroyed. */
typedef struct rh_CreateArgs {
  size_t struct_size;
  const rh_HostApi* host;      /* owned by the host, valid until exit */
  rh_Context* context;         /* owned by the host, valid until Destroy */
  const rh_ConfigNode* config; /* the component's YAML subtree (never NULL) */
  rh_StringView type_name;     /* the `type:` that selected this component */
  rh_StringView work_dir;      /* the job's work_dir (absolute; may not exist yet) */
} rh_CreateArgs;
#define RH_CREATE_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_CreateArgs, work_dir)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_HOST_H_ */
