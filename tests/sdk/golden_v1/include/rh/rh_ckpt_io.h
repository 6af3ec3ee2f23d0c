/* rh_ckpt_io.h — checkpoint storage: how a state dict becomes files.
 *
 * The host owns the checkpoint protocol (DESIGN.md §6): it creates the
 * temporary directory `<name>.tmp-<id>/`, asks the checkpoint-IO component to
 * write each state dict into it, writes meta.json, and publishes the
 * directory by an atomic rename once every rank's files are durable. A
 * checkpoint-IO component only turns a state dict into file(s) and back, and
 * checks files it wrote (size, checksum) so that a torn checkpoint is found.
 *
 * Who calls what: the host calls every function below; the plugin implements
 * them. Create, Save and Load are required.
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

typedef struct rh_CheckpointIoVtable {
  size_t struct_size;
  /* Required. Creates an instance from args->config (the `checkpoint_io:` map). */
  rh_Error* (*Create)(const rh_CreateArgs* args, rh_CheckpointIoInstance** out);
  /* Optional. Frees the instance. Accepts NULL. */
  void (*Destroy)(rh_CheckpointIoInstance* instance);
  /* Required. Writes args->dict into args->dir. When it returns without
   * error (or, for an asynchronous writer, when Flush returns) the files are
   * complete and fsynced. Never writes outside args->dir. */
  rh_Error* (*Save)(rh_CheckpointIoInstance* instance, const rh_CheckpointFileArgs* args);
  /* Required. Reads what Save wrote into args->dict. A truncated or
   * corrupted file is an RH_ERROR_DATA_LOSS error naming the file. */
  rh_Error* (*Load)(rh_CheckpointIoInstance* instance, const rh_CheckpointFileArgs* args);
  /* Optional. Checks the files of `stem` without loading the tensors
   * (args->dict is NULL). NULL = the host assumes they are valid when Load
   * succeeds. */
  rh_Error* (*Verify)(rh_CheckpointIoInstance* instance, const rh_CheckpointFileArgs* args);
  /* Optional. Waits until every Save issued so far is durable. NULL =
   * Save is synchronous. */
  rh_Error* (*Flush)(rh_CheckpointIoInstance* instance);
} rh_CheckpointIoVtable;
#define RH_CHECKPOINT_IO_VTABLE_STRUCT_SIZE RH_STRUCT_SIZE(rh_CheckpointIoVtable, Flush)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RH_CKPT_IO_H_ */
