/* rh_host.h — the host API table: everything a plugin may ask of the host.
 *
 * The host fills one rh_HostApi and hands a pointer to it to every plugin's
 * Init and to every component's Create. The table is owned by the host and
 * valid until the process exits. A plugin keeps the pointer; it never copies
 * the struct (a newer host's table is larger than the plugin's headers know).
 *
 * Every function here is implemented by the host. Functions are thread-safe
 * unless their comment says otherwise. Errors, Log*, Config_* and the
 * StateDict_* of 1.0 are always provided. Any other entry may be NULL,
 * meaning this host does not provide it (e.g. Comm_* in a single-process
 * run, or a host of an older minor): check before calling.
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
 *   rh_CheckpointIo a checkpoint-IO component another one wraps (1.6);
 *                  owned by the component that created it.
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
typedef struct rh_CheckpointIo rh_CheckpointIo;
/* Defined in rh_ckpt_io.h (which includes this header). */
struct rh_CheckpointFileArgs;
struct rh_CheckpointSlice;

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
  /* Each rank's values divided by Comm_Size, then summed: how ddp averages
   * gradients (pre-divided by the world size, then summed), so a strategy
   * averaging with it rounds as ddp does, bit for bit with the gloo backend
   * (the sum after the division differs on 3 or 5 ranks, not on 2 or 4).
   * Under NCCL it is ncclAvg, which rounds as NCCL does. Floating dtypes
   * only. */
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
  /* In *_train_iter events: the current epoch, global iteration and batch
   * of the epoch (0-based). In after_train_epoch: the epoch that ended, the
   * iterations done, the batches of that epoch. In val/test events: train
   * epochs and iterations done, and the val/test batch. Elsewhere: epochs,
   * iterations and batches of the current epoch done. */
  int64_t epoch;
  int64_t iter;
  int64_t inner_iter;
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
  /* The stream the host queues this rank's work on (a cudaStream_t) when
   * Device_Current is a CUDA device, NULL on the CPU. LibTorch's default
   * stream (handle 0) is returned as cudaStreamLegacy ((void*)0x1), so a
   * CUDA rank never gets NULL. LibTorch keeps a current stream per
   * thread: call it on the thread the host calls the plugin on (the one
   * that computes). Provided by hosts built with a CUDA LibTorch. */
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
   * host, valid until every strategy and hook instance is destroyed (the
   * host destroys them first; groups likewise). Collectives on one communicator must be
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
  /* `output` holds Comm_Size inputs concatenated in rank order (dim 0).
   * `input` may be this rank's slot of `output` exactly (in place); any
   * other overlap is refused (RH_ERROR_INVALID_ARGUMENT). */
  rh_Error* (*Comm_AllGather)(rh_Comm* comm, const DLManagedTensor* input, DLManagedTensor* output,
                              rh_CommWork** work);
  /* `input` holds Comm_Size equal chunks (dim 0); rank r gets the reduction
   * of every rank's chunk r in `output`. `output` may overlap `input` (this
   * rank's chunk of it, typically); `input` is never written. */
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

  /* ---- Checkpoints (ABI 1.1) ------------------------------------------- */
  /* Saves a checkpoint named `name` (a directory of the job's work_dir) now,
   * through the host's protocol: before_save_checkpoint hooks, the
   * strategy's state, the checkpoint-IO plugin, an atomic publish, then the
   * `latest` pointer. Call only while handling after_train_iter,
   * after_train_epoch or after_val_epoch. `name` is borrowed; it must be a
   * plain file name ([A-Za-z0-9_.-], not "latest"). On every rank. */
  rh_Error* (*Checkpoint_Save)(rh_Context* context, const char* name, size_t name_size);
  /* Deletes the published checkpoint `name` of the work_dir (max_keep,
   * replaced best). Refuses the one `latest` points to. When it returns,
   * `name` is no longer a checkpoint (renamed to a temporary); its files are
   * deleted on a host thread, and a failure there is a warning in the log.
   * A name that does not exist is not an error. */
  rh_Error* (*Checkpoint_Remove)(rh_Context* context, const char* name, size_t name_size);

  /* ---- A checkpoint-IO component inside another (ABI 1.6) --------------- */
  /* For a checkpoint-IO component that wraps another (the shipped `async`
   * wraps the one it writes with): creates the component `config` selects
   * (its `type:` and optional `plugin:`), found, checked and created as the
   * job's `checkpoint_io:` is, its unread keys reported as unknown. Call it
   * from the wrapper's Create with a node of the wrapper's own config. The
   * handle is owned by the caller until CheckpointIo_Destroy. */
  rh_Error* (*CheckpointIo_Create)(rh_Context* context, const rh_ConfigNode* config,
                                   rh_CheckpointIo** out);
  /* Destroys the component. Accepts NULL. */
  void (*CheckpointIo_Destroy)(rh_CheckpointIo* io);
  /* The component's functions (rh_ckpt_io.h), called through the host, which
   * supplies the defaults of those it lacks: Verify and Flush succeed,
   * LoadSlices is RH_ERROR_UNIMPLEMENTED. Errors are prefixed with the
   * component's name. One call at a time per handle (not thread-safe for one
   * handle; any thread). Arguments are borrowed as rh_ckpt_io.h says. */
  rh_Error* (*CheckpointIo_Save)(rh_CheckpointIo* io, const struct rh_CheckpointFileArgs* args);
  rh_Error* (*CheckpointIo_Load)(rh_CheckpointIo* io, const struct rh_CheckpointFileArgs* args);
  rh_Error* (*CheckpointIo_Verify)(rh_CheckpointIo* io, const struct rh_CheckpointFileArgs* args);
  rh_Error* (*CheckpointIo_Flush)(rh_CheckpointIo* io);
  rh_Error* (*CheckpointIo_LoadSlices)(rh_CheckpointIo* io,
                                       const struct rh_CheckpointFileArgs* args,
                                       const struct rh_CheckpointSlice* slices, size_t num_slices);

  /* ---- State dicts without copies (ABI 1.7) ----------------------------- */
  /* Load: adds tensor `key` (dtype, `ndim` dimensions of `shape`, C order)
   * whose bytes the caller then writes: *data receives dtype size x numel
   * writable bytes, uninitialised, owned by the dict, valid until the call
   * that handed over `dict` returns (NULL for 0 bytes). The host may place
   * them where the tensor is going (a model parameter), so a checkpoint-IO
   * plugin that reads the file straight into *data saves the copy that
   * StateDict_PutTensor makes. Checked like StateDict_PutTensor's tensors
   * (RH_ERROR_INVALID_ARGUMENT naming `key`); a key that exists is
   * replaced. Thread-safe for different dicts only. */
  rh_Error* (*StateDict_AllocTensor)(rh_StateDict* dict, const char* key, size_t key_size,
                                     DLDataType dtype, const int64_t* shape, int32_t ndim,
                                     void** data);
  /* Save: the CRC-32 (zlib's, as rh/cpp/crc32.hpp computes it) of tensor
   * `key`'s bytes in C order, which the checkpoint-IO plugin computed while
   * writing them; the host records it in meta.json instead of reading the
   * tensor a second time. RH_ERROR_NOT_FOUND when `key` is no tensor of
   * `dict`. Callable from the thread that writes (SavesInBackground). */
  rh_Error* (*StateDict_SetChecksum)(rh_StateDict* dict, const char* key, size_t key_size,
                                     uint32_t crc32);
} rh_HostApi;
#define RH_HOST_API_STRUCT_SIZE RH_STRUCT_SIZE(rh_HostApi, StateDict_SetChecksum)

/* Passed to every component's Create. Borrowed for the call; the pointers
 * inside stay valid until the instance is destroyed. */
typedef struct rh_CreateArgs {
  size_t struct_size;
  const rh_HostApi* host;      /* owned by the host, valid until exit */
  rh_Context* context;         /* owned by the host, valid until Destroy */
  const rh_ConfigNode* config; /* the component's YAML subtree (never NULL) */
  rh_StringView type_name;     /* the `type:` that selected this component */
  rh_StringView work_dir;      /* the job's work_dir (absolute; may not exist yet) */
  /* ABI 1.3. The job file's directory (absolute): where relative paths in the
   * component's config start, as for the host's own keys. Owned by the host,
   * valid until Destroy. */
  rh_StringView job_dir;
} rh_CreateArgs;
#define RH_CREATE_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_CreateArgs, job_dir)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_HOST_H_ */
