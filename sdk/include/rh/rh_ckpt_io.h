/* rh_ckpt_io.h — checkpoint storage: how a state dict becomes files.
 *
 * The host owns the checkpoint protocol (docs/architecture.md §6): it creates the
 * temporary directory `<name>.tmp-<id>/`, asks the checkpoint-IO component to
 * write each state dict into it, writes meta.json, and publishes the
 * directory by an atomic rename once every rank's files are durable. A
 * checkpoint-IO component only turns a state dict into file(s) and back, and
 * checks files it wrote (size, checksum) so that a torn checkpoint is found.
 *
 * Who calls what: the host calls every function below; the plugin implements
 * them. Create, Save and Load are required. The host never calls two
 * functions of one instance at the same time; with SavesInBackground, Flush
 * comes from another thread than Save.
 */
#ifndef RH_CKPT_IO_H_
#define RH_CKPT_IO_H_

#include "rh/rh_host.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rh_CheckpointIoInstance rh_CheckpointIoInstance; /* owned by the plugin */

typedef struct rh_CheckpointFileArgs {
  size_t struct_size;
  rh_StringView dir;  /* existing directory to write into / read from; borrowed */
  rh_StringView stem; /* file name without extension, e.g. "model" or
                         "optim.rank0"; borrowed */
  /* Save: the content to write (borrowed for the call).
   * Load: an empty dict the plugin fills (PutTensor/PutBytes). */
  rh_StateDict* dict;
} rh_CheckpointFileArgs;
#define RH_CHECKPOINT_FILE_ARGS_STRUCT_SIZE RH_STRUCT_SIZE(rh_CheckpointFileArgs, dict)

/* One contiguous range of a stored tensor (ABI 1.5): elements
 * [offset, offset + numel) of the tensor `key` flattened in C order. A
 * rank resuming on another world size reads only the pieces of the shards
 * it needs (docs/checkpoint-format.md). */
typedef struct rh_CheckpointSlice {
  size_t struct_size;
  rh_StringView key; /* tensor key in the file; borrowed */
  int64_t offset;    /* first element, >= 0 */
  int64_t numel;     /* elements, >= 0; offset + numel <= the tensor's numel */
} rh_CheckpointSlice;
#define RH_CHECKPOINT_SLICE_STRUCT_SIZE RH_STRUCT_SIZE(rh_CheckpointSlice, numel)

typedef struct rh_CheckpointIoVtable {
  size_t struct_size;
  /* Required. Creates an instance from args->config (the `checkpoint_io:` map). */
  rh_Error* (*Create)(const rh_CreateArgs* args, rh_CheckpointIoInstance** out);
  /* Optional. Frees the instance. Accepts NULL. */
  void (*Destroy)(rh_CheckpointIoInstance* instance);
  /* Required. Writes args->dict into args->dir. When it returns without
   * error (or, for an asynchronous writer, when Flush returns) the files are
   * complete; they are fsynced then too, or, for a plugin with Flush, when
   * Flush returns (the host calls Flush before it publishes a checkpoint).
   * Never writes outside args->dir. */
  rh_Error* (*Save)(rh_CheckpointIoInstance* instance, const rh_CheckpointFileArgs* args);
  /* Required. Reads what Save wrote into args->dict. A truncated or
   * corrupted file is an RH_ERROR_DATA_LOSS error naming the file. */
  rh_Error* (*Load)(rh_CheckpointIoInstance* instance, const rh_CheckpointFileArgs* args);
  /* Optional. Checks the files of `stem` without loading the tensors
   * (args->dict is NULL). NULL = the host assumes they are valid when Load
   * succeeds. */
  rh_Error* (*Verify)(rh_CheckpointIoInstance* instance, const rh_CheckpointFileArgs* args);
  /* Optional. Waits until every Save issued so far is durable (fsynced,
   * with its directory). NULL = Save is durable when it returns. */
  rh_Error* (*Flush)(rh_CheckpointIoInstance* instance);
  /* ABI 1.5. Optional. Reads only `slices` of the tensors of `stem` into
   * args->dict: slice i becomes a 1-D tensor of slices[i].numel elements of
   * the stored dtype under the key slices[i].key (each key at most once per
   * call). Reads only those bytes (pread or mmap), so the checksums of whole
   * tensors are not checked here: the host verifies a checkpoint before it
   * resumes from it. A key that is not in the file is RH_ERROR_NOT_FOUND, a
   * range beyond the tensor RH_ERROR_INVALID_ARGUMENT, each naming the file.
   * NULL, or (ABI 1.6) RH_ERROR_UNIMPLEMENTED from this instance (a wrapper
   * whose wrapped component cannot) = the host calls Load and takes the
   * ranges from the whole tensors. */
  rh_Error* (*LoadSlices)(rh_CheckpointIoInstance* instance, const rh_CheckpointFileArgs* args,
                          const rh_CheckpointSlice* slices, size_t num_slices);
  /* ABI 1.6. Optional. Returns 1 when Save only queues the write: the dict
   * given to Save is read after Save returns, until Flush returns. The host
   * then hands Save a snapshot it owns (CPU copies nothing changes), and
   * calls Flush and publishes the checkpoint on a background thread while
   * training goes on; at most one save is in flight. NULL or 0 = args->dict
   * is borrowed for the call of Save only. */
  int32_t (*SavesInBackground)(const rh_CheckpointIoInstance* instance);
} rh_CheckpointIoVtable;
#define RH_CHECKPOINT_IO_VTABLE_STRUCT_SIZE RH_STRUCT_SIZE(rh_CheckpointIoVtable, SavesInBackground)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_CKPT_IO_H_ */
