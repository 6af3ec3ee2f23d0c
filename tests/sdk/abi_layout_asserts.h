/* abi_layout_asserts.h — pins the memory layout of every public struct of the
 * runner-host C ABI (every header of sdk/include/rh/) with exact numbers.
 *
 * Included by AbiLayoutTest.c (compiled as C11) and AbiLayoutTest.cpp
 * (compiled as C++17): both compilers must agree, and a failing assert is a
 * compile error. The numbers are for LP64 Linux (x86_64, aarch64), where
 * size_t and pointers are 8 bytes, enums and int32_t 4.
 *
 * What a failure means:
 *  - an offset moved or a size changed for a field that exists: an ABI break
 *    (reorder, retype, removal). Undo it, or bump RH_ABI_VERSION_MAJOR.
 *  - a struct grew because a field was appended: a minor change. Add the new
 *    field's offset here, update the size, check that the RH_*_STRUCT_SIZE
 *    constant moved to the new last field, and add a CHANGELOG line to
 *    rh_abi.h.
 *
 * Every RH_*_STRUCT_SIZE constant equals sizeof its struct (no tail
 * padding), except where RH_ABI_PIN_STRUCT_SIZE_TAIL says otherwise: there the
 * constant ends at the last field and sizeof adds tail padding. That is the
 * intended reading of RH_STRUCT_SIZE (a field appended into the padding gets
 * a bigger struct_size), so a plugin must set struct_size from the constant,
 * never from sizeof.
 */
#ifndef RH_TESTS_ABI_LAYOUT_ASSERTS_H_
#define RH_TESTS_ABI_LAYOUT_ASSERTS_H_

#include "rh/rh_plugin.h" /* includes every other public header */

#if defined(__LP64__) && defined(__linux__)
#define RH_ABI_LAYOUT_PINNED 1

#define RH_ABI_PIN_SIZE(type, size) \
  RH_STATIC_ASSERT(sizeof(type) == (size), "sizeof(" #type ") changed: ABI break")
#define RH_ABI_PIN_OFFSET(type, field, offset) \
  RH_STATIC_ASSERT(offsetof(type, field) == (offset), #type "." #field " moved: ABI break")
/* The struct_size constant of `type` ends at its last field and the struct
 * has no tail padding. */
#define RH_ABI_PIN_STRUCT_SIZE(constant, type, size)                             \
  RH_STATIC_ASSERT((constant) == (size) && sizeof(type) == (constant), #constant \
                   " is stale (not the end of the last field of " #type ") or " #type " changed")
/* The same, for a struct with `tail` bytes of padding after its last field. */
#define RH_ABI_PIN_STRUCT_SIZE_TAIL(constant, type, size, tail)                           \
  RH_STATIC_ASSERT((constant) == (size) && sizeof(type) == (constant) + (tail), #constant \
                   " is stale (not the end of the last field of " #type ") or " #type " changed")

/* ---- Scalars the structs are made of ------------------------------------ */
RH_ABI_PIN_SIZE(size_t, 8);
RH_ABI_PIN_SIZE(void*, 8);
RH_ABI_PIN_SIZE(void (*)(void), 8);
RH_ABI_PIN_SIZE(rh_ErrorCode, 4);
RH_ABI_PIN_SIZE(rh_ComponentKind, 4);
RH_ABI_PIN_SIZE(rh_LogLevel, 4);
RH_ABI_PIN_SIZE(rh_ConfigKind, 4);
RH_ABI_PIN_SIZE(rh_ReduceOp, 4);
RH_ABI_PIN_SIZE(rh_RunMode, 4);
RH_ABI_PIN_SIZE(rh_HookEvent, 4);
RH_ABI_PIN_SIZE(rh_LoadPhase, 4);
RH_ABI_PIN_SIZE(rh_UnitPhase, 4);

/* ---- DLPack (dlpack/dlpack.h): crosses by value (DLDevice, DLDataType)
 * and by pointer (DLManagedTensor), so its layout is part of ours. -------- */
RH_ABI_PIN_SIZE(DLDevice, 8);
RH_ABI_PIN_OFFSET(DLDevice, device_type, 0);
RH_ABI_PIN_OFFSET(DLDevice, device_id, 4);
RH_ABI_PIN_SIZE(DLDataType, 4);
RH_ABI_PIN_OFFSET(DLDataType, code, 0);
RH_ABI_PIN_OFFSET(DLDataType, bits, 1);
RH_ABI_PIN_OFFSET(DLDataType, lanes, 2);
RH_ABI_PIN_SIZE(DLTensor, 48);
RH_ABI_PIN_OFFSET(DLTensor, data, 0);
RH_ABI_PIN_OFFSET(DLTensor, device, 8);
RH_ABI_PIN_OFFSET(DLTensor, ndim, 16);
RH_ABI_PIN_OFFSET(DLTensor, dtype, 20);
RH_ABI_PIN_OFFSET(DLTensor, shape, 24);
RH_ABI_PIN_OFFSET(DLTensor, strides, 32);
RH_ABI_PIN_OFFSET(DLTensor, byte_offset, 40);
RH_ABI_PIN_SIZE(DLManagedTensor, 64);
RH_ABI_PIN_OFFSET(DLManagedTensor, dl_tensor, 0);
RH_ABI_PIN_OFFSET(DLManagedTensor, manager_ctx, 48);
RH_ABI_PIN_OFFSET(DLManagedTensor, deleter, 56);

/* ---- rh_abi.h ------------------------------------------------------------ */

RH_ABI_PIN_SIZE(rh_StringView, 16);
RH_ABI_PIN_OFFSET(rh_StringView, data, 0);
RH_ABI_PIN_OFFSET(rh_StringView, size, 8);

/* ---- rh_host.h ----------------------------------------------------------- */

RH_ABI_PIN_SIZE(rh_RunState, 64);
RH_ABI_PIN_OFFSET(rh_RunState, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_RunState, mode, 8);
RH_ABI_PIN_OFFSET(rh_RunState, epoch, 16);
RH_ABI_PIN_OFFSET(rh_RunState, iter, 24);
RH_ABI_PIN_OFFSET(rh_RunState, inner_iter, 32);
RH_ABI_PIN_OFFSET(rh_RunState, max_epochs, 40);
RH_ABI_PIN_OFFSET(rh_RunState, max_iters, 48);
RH_ABI_PIN_OFFSET(rh_RunState, rank, 56);
RH_ABI_PIN_OFFSET(rh_RunState, world_size, 60);
RH_ABI_PIN_STRUCT_SIZE(RH_RUN_STATE_STRUCT_SIZE, rh_RunState, 64);

RH_ABI_PIN_SIZE(rh_Metric, 24);
RH_ABI_PIN_OFFSET(rh_Metric, name, 0);
RH_ABI_PIN_OFFSET(rh_Metric, value, 16);

RH_ABI_PIN_SIZE(rh_HostApi, 432);
RH_ABI_PIN_OFFSET(rh_HostApi, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_HostApi, abi_major, 8);
RH_ABI_PIN_OFFSET(rh_HostApi, abi_minor, 12);
RH_ABI_PIN_OFFSET(rh_HostApi, Error_Create, 16);
RH_ABI_PIN_OFFSET(rh_HostApi, Error_Destroy, 24);
RH_ABI_PIN_OFFSET(rh_HostApi, Error_Code, 32);
RH_ABI_PIN_OFFSET(rh_HostApi, Error_Message, 40);
RH_ABI_PIN_OFFSET(rh_HostApi, Log, 48);
RH_ABI_PIN_OFFSET(rh_HostApi, Log_IsEnabled, 56);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_Kind, 64);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_Get, 72);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_Size, 80);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_At, 88);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_KeyAt, 96);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_AsInt, 104);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_AsDouble, 112);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_AsBool, 120);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_AsString, 128);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_Path, 136);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_Location, 144);
RH_ABI_PIN_OFFSET(rh_HostApi, Config_Error, 152);
RH_ABI_PIN_OFFSET(rh_HostApi, Tensor_Alloc, 160);
RH_ABI_PIN_OFFSET(rh_HostApi, Device_Current, 168);
RH_ABI_PIN_OFFSET(rh_HostApi, Stream_Current, 176);
RH_ABI_PIN_OFFSET(rh_HostApi, RunState_Get, 184);
RH_ABI_PIN_OFFSET(rh_HostApi, Metric_Put, 192);
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_PutTensor, 200);
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_PutBytes, 208);
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_GetTensor, 216);
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_GetBytes, 224);
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_Size, 232);
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_KeyAt, 240);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_World, 248);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_Rank, 256);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_Size, 264);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_AllReduce, 272);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_AllGather, 280);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_ReduceScatter, 288);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_Broadcast, 296);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_Barrier, 304);
RH_ABI_PIN_OFFSET(rh_HostApi, Comm_NewGroup, 312);
RH_ABI_PIN_OFFSET(rh_HostApi, CommWork_Wait, 320);
RH_ABI_PIN_OFFSET(rh_HostApi, CommWork_IsCompleted, 328);
RH_ABI_PIN_OFFSET(rh_HostApi, CommWork_Destroy, 336);
/* ABI 1.1 */
RH_ABI_PIN_OFFSET(rh_HostApi, Checkpoint_Save, 344);
RH_ABI_PIN_OFFSET(rh_HostApi, Checkpoint_Remove, 352);
/* 1.6 */
RH_ABI_PIN_OFFSET(rh_HostApi, CheckpointIo_Create, 360);
RH_ABI_PIN_OFFSET(rh_HostApi, CheckpointIo_Destroy, 368);
RH_ABI_PIN_OFFSET(rh_HostApi, CheckpointIo_Save, 376);
RH_ABI_PIN_OFFSET(rh_HostApi, CheckpointIo_Load, 384);
RH_ABI_PIN_OFFSET(rh_HostApi, CheckpointIo_Verify, 392);
RH_ABI_PIN_OFFSET(rh_HostApi, CheckpointIo_Flush, 400);
RH_ABI_PIN_OFFSET(rh_HostApi, CheckpointIo_LoadSlices, 408);
/* 1.7 */
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_AllocTensor, 416);
RH_ABI_PIN_OFFSET(rh_HostApi, StateDict_SetChecksum, 424);
RH_ABI_PIN_STRUCT_SIZE(RH_HOST_API_STRUCT_SIZE, rh_HostApi, 432);

RH_ABI_PIN_SIZE(rh_CreateArgs, 80);
RH_ABI_PIN_OFFSET(rh_CreateArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_CreateArgs, host, 8);
RH_ABI_PIN_OFFSET(rh_CreateArgs, context, 16);
RH_ABI_PIN_OFFSET(rh_CreateArgs, config, 24);
RH_ABI_PIN_OFFSET(rh_CreateArgs, type_name, 32);
RH_ABI_PIN_OFFSET(rh_CreateArgs, work_dir, 48);
RH_ABI_PIN_OFFSET(rh_CreateArgs, job_dir, 64); /* 1.3 */
RH_ABI_PIN_STRUCT_SIZE(RH_CREATE_ARGS_STRUCT_SIZE, rh_CreateArgs, 80);

/* ---- rh_hook.h ----------------------------------------------------------- */

RH_ABI_PIN_SIZE(rh_HookEventArgs, 64);
RH_ABI_PIN_OFFSET(rh_HookEventArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_HookEventArgs, event, 8);
RH_ABI_PIN_OFFSET(rh_HookEventArgs, state, 16);
RH_ABI_PIN_OFFSET(rh_HookEventArgs, metrics, 24);
RH_ABI_PIN_OFFSET(rh_HookEventArgs, num_metrics, 32);
RH_ABI_PIN_OFFSET(rh_HookEventArgs, checkpoint, 40);
RH_ABI_PIN_OFFSET(rh_HookEventArgs, checkpoint_dir, 48);
RH_ABI_PIN_STRUCT_SIZE(RH_HOOK_EVENT_ARGS_STRUCT_SIZE, rh_HookEventArgs, 64);

RH_ABI_PIN_SIZE(rh_HookVtable, 48);
RH_ABI_PIN_OFFSET(rh_HookVtable, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_HookVtable, Create, 8);
RH_ABI_PIN_OFFSET(rh_HookVtable, Destroy, 16);
RH_ABI_PIN_OFFSET(rh_HookVtable, EventMask, 24);
RH_ABI_PIN_OFFSET(rh_HookVtable, Priority, 32);
RH_ABI_PIN_OFFSET(rh_HookVtable, OnEvent, 40);
RH_ABI_PIN_STRUCT_SIZE(RH_HOOK_VTABLE_STRUCT_SIZE, rh_HookVtable, 48);

/* ---- rh_strategy.h ------------------------------------------------------- */

RH_ABI_PIN_SIZE(rh_ParamInfo, 64);
RH_ABI_PIN_OFFSET(rh_ParamInfo, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_ParamInfo, name, 8);
RH_ABI_PIN_OFFSET(rh_ParamInfo, module_path, 24);
RH_ABI_PIN_OFFSET(rh_ParamInfo, requires_grad, 40);
RH_ABI_PIN_OFFSET(rh_ParamInfo, unit, 44);
RH_ABI_PIN_OFFSET(rh_ParamInfo, data, 48);
RH_ABI_PIN_OFFSET(rh_ParamInfo, tied, 56); /* 1.3 */
/* 60 bytes of fields, 4 of tail padding (alignment of size_t). */
RH_ABI_PIN_STRUCT_SIZE_TAIL(RH_PARAM_INFO_STRUCT_SIZE, rh_ParamInfo, 60, 4);

RH_ABI_PIN_SIZE(rh_ModelApi, 128);
RH_ABI_PIN_OFFSET(rh_ModelApi, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_NumParams, 8);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_GetParam, 16);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_GetGrad, 24);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_SetGrad, 32);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_SetParamData, 40);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_NumBuffers, 48);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_GetBuffer, 56);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_NumUnits, 64);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_UnitName, 72);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_AddGradReadyCallback, 80);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_AddUnitCallback, 88);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_BindGrad, 96);
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_ReleaseGrad, 104);         /* 1.3 */
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_FreeParamStorage, 112);    /* 1.3 */
RH_ABI_PIN_OFFSET(rh_ModelApi, Model_RestoreParamStorage, 120); /* 1.3 */
RH_ABI_PIN_STRUCT_SIZE(RH_MODEL_API_STRUCT_SIZE, rh_ModelApi, 128);

RH_ABI_PIN_SIZE(rh_StrategyTraits, 48);
RH_ABI_PIN_OFFSET(rh_StrategyTraits, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_StrategyTraits, load_phase, 8);
RH_ABI_PIN_OFFSET(rh_StrategyTraits, needs_comm, 12);
RH_ABI_PIN_OFFSET(rh_StrategyTraits, sharded_checkpoint, 16);
RH_ABI_PIN_OFFSET(rh_StrategyTraits, input_dtype, 20);         /* 1.3 */
RH_ABI_PIN_OFFSET(rh_StrategyTraits, sharded_model_state, 24); /* 1.4 */
RH_ABI_PIN_OFFSET(rh_StrategyTraits, load_from_root, 28);      /* 1.4 */
RH_ABI_PIN_OFFSET(rh_StrategyTraits, precision_keys, 32);      /* 1.8 */
RH_ABI_PIN_STRUCT_SIZE(RH_STRATEGY_TRAITS_STRUCT_SIZE, rh_StrategyTraits, 48);

RH_ABI_PIN_SIZE(rh_SetupEnvArgs, 56);
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, world, 8);
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, local_rank, 16);
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, seed, 24);
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, device, 32);
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, rank_device, 40);      /* 1.3 */
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, local_world_size, 48); /* 1.3 */
RH_ABI_PIN_OFFSET(rh_SetupEnvArgs, node_rank, 52);        /* 1.3 */
RH_ABI_PIN_STRUCT_SIZE(RH_SETUP_ENV_ARGS_STRUCT_SIZE, rh_SetupEnvArgs, 56);

RH_ABI_PIN_SIZE(rh_WrapArgs, 24);
RH_ABI_PIN_OFFSET(rh_WrapArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_WrapArgs, model, 8);
RH_ABI_PIN_OFFSET(rh_WrapArgs, model_api, 16);
RH_ABI_PIN_STRUCT_SIZE(RH_WRAP_ARGS_STRUCT_SIZE, rh_WrapArgs, 24);

RH_ABI_PIN_SIZE(rh_OptimParam, 64);
RH_ABI_PIN_OFFSET(rh_OptimParam, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_OptimParam, name, 8);
RH_ABI_PIN_OFFSET(rh_OptimParam, param, 24);
RH_ABI_PIN_OFFSET(rh_OptimParam, grad, 32);
RH_ABI_PIN_OFFSET(rh_OptimParam, full_shape, 40);  /* 1.3 */
RH_ABI_PIN_OFFSET(rh_OptimParam, full_ndim, 48);   /* 1.3 */
RH_ABI_PIN_OFFSET(rh_OptimParam, full_offset, 56); /* 1.3 */
RH_ABI_PIN_STRUCT_SIZE(RH_OPTIM_PARAM_STRUCT_SIZE, rh_OptimParam, 64);

RH_ABI_PIN_SIZE(rh_OptimParamSink, 24);
RH_ABI_PIN_OFFSET(rh_OptimParamSink, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_OptimParamSink, user_data, 8);
RH_ABI_PIN_OFFSET(rh_OptimParamSink, add, 16);
RH_ABI_PIN_STRUCT_SIZE(RH_OPTIM_PARAM_SINK_STRUCT_SIZE, rh_OptimParamSink, 24);

/* ABI 1.9 */
RH_ABI_PIN_SIZE(rh_ParamSize, 56);
RH_ABI_PIN_OFFSET(rh_ParamSize, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_ParamSize, name, 8);
RH_ABI_PIN_OFFSET(rh_ParamSize, numel, 24);
RH_ABI_PIN_OFFSET(rh_ParamSize, rows, 32);
RH_ABI_PIN_OFFSET(rh_ParamSize, element_size, 40);
RH_ABI_PIN_OFFSET(rh_ParamSize, unit, 44);
RH_ABI_PIN_OFFSET(rh_ParamSize, requires_grad, 48);
RH_ABI_PIN_OFFSET(rh_ParamSize, tied, 52);
RH_ABI_PIN_STRUCT_SIZE(RH_PARAM_SIZE_STRUCT_SIZE, rh_ParamSize, 56);

RH_ABI_PIN_SIZE(rh_MemoryEstimateArgs, 56);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, params, 8);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, num_params, 16);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, num_units, 24);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, world_size, 28);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, rank, 32);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, local_world_size, 36);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, accumulation, 40);
RH_ABI_PIN_OFFSET(rh_MemoryEstimateArgs, buffer_bytes, 48);
RH_ABI_PIN_STRUCT_SIZE(RH_MEMORY_ESTIMATE_ARGS_STRUCT_SIZE, rh_MemoryEstimateArgs, 56);

RH_ABI_PIN_SIZE(rh_MemoryEstimate, 72);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, param_bytes, 8);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, grad_bytes, 16);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, optimizer_elements, 24);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, optimizer_element_size, 32);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, master_bytes, 40);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, comm_bytes, 48);
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, gathered_bytes, 56);
/* ABI 1.10 */
RH_ABI_PIN_OFFSET(rh_MemoryEstimate, backward_grad_bytes, 64);
RH_ABI_PIN_STRUCT_SIZE(RH_MEMORY_ESTIMATE_STRUCT_SIZE, rh_MemoryEstimate, 72);

RH_ABI_PIN_SIZE(rh_StrategyVtable, 152);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, Create, 8);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, Destroy, 16);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, GetTraits, 24);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, SetupEnv, 32);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, Wrap, 40);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, OptimizerParams, 48);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, SyncGradients, 56);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, AfterOptimizerStep, 64);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, StateExport, 72);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, StateImport, 80);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, Teardown, 88);
/* ABI 1.1 */
RH_ABI_PIN_OFFSET(rh_StrategyVtable, BeforeBackward, 96);
/* ABI 1.3 */
RH_ABI_PIN_OFFSET(rh_StrategyVtable, LossScale, 104);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, ShouldStep, 112);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, ReduceGradNorm, 120);
RH_ABI_PIN_OFFSET(rh_StrategyVtable, UnitParams, 128);
/* ABI 1.9 */
RH_ABI_PIN_OFFSET(rh_StrategyVtable, EstimateMemory, 136);
/* ABI 1.11 */
RH_ABI_PIN_OFFSET(rh_StrategyVtable, TensorParallelPlan, 144);
RH_ABI_PIN_STRUCT_SIZE(RH_STRATEGY_VTABLE_STRUCT_SIZE, rh_StrategyVtable, 152);

/* ABI 1.11 */
RH_ABI_PIN_SIZE(rh_TensorParallelStyle, 4);
RH_ABI_PIN_SIZE(rh_TensorParallelRule, 32);
RH_ABI_PIN_OFFSET(rh_TensorParallelRule, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_TensorParallelRule, style, 8);
RH_ABI_PIN_OFFSET(rh_TensorParallelRule, pattern, 16);
RH_ABI_PIN_STRUCT_SIZE(RH_TENSOR_PARALLEL_RULE_STRUCT_SIZE, rh_TensorParallelRule, 32);
RH_ABI_PIN_SIZE(rh_TensorParallelPlanArgs, 56);
RH_ABI_PIN_OFFSET(rh_TensorParallelPlanArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_TensorParallelPlanArgs, model_type, 8);
RH_ABI_PIN_OFFSET(rh_TensorParallelPlanArgs, size, 24);
RH_ABI_PIN_OFFSET(rh_TensorParallelPlanArgs, group, 32);
RH_ABI_PIN_OFFSET(rh_TensorParallelPlanArgs, rules, 40);
RH_ABI_PIN_OFFSET(rh_TensorParallelPlanArgs, num_rules, 48);
RH_ABI_PIN_STRUCT_SIZE(RH_TENSOR_PARALLEL_PLAN_ARGS_STRUCT_SIZE, rh_TensorParallelPlanArgs, 56);

/* ---- rh_ckpt_io.h -------------------------------------------------------- */

RH_ABI_PIN_SIZE(rh_CheckpointFileArgs, 48);
RH_ABI_PIN_OFFSET(rh_CheckpointFileArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_CheckpointFileArgs, dir, 8);
RH_ABI_PIN_OFFSET(rh_CheckpointFileArgs, stem, 24);
RH_ABI_PIN_OFFSET(rh_CheckpointFileArgs, dict, 40);
RH_ABI_PIN_STRUCT_SIZE(RH_CHECKPOINT_FILE_ARGS_STRUCT_SIZE, rh_CheckpointFileArgs, 48);

RH_ABI_PIN_SIZE(rh_CheckpointSlice, 40);
RH_ABI_PIN_OFFSET(rh_CheckpointSlice, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_CheckpointSlice, key, 8);
RH_ABI_PIN_OFFSET(rh_CheckpointSlice, offset, 24);
RH_ABI_PIN_OFFSET(rh_CheckpointSlice, numel, 32);
RH_ABI_PIN_STRUCT_SIZE(RH_CHECKPOINT_SLICE_STRUCT_SIZE, rh_CheckpointSlice, 40);

RH_ABI_PIN_SIZE(rh_CheckpointIoVtable, 72);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, Create, 8);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, Destroy, 16);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, Save, 24);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, Load, 32);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, Verify, 40);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, Flush, 48);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, LoadSlices, 56);
RH_ABI_PIN_OFFSET(rh_CheckpointIoVtable, SavesInBackground, 64); /* 1.6 */
RH_ABI_PIN_STRUCT_SIZE(RH_CHECKPOINT_IO_VTABLE_STRUCT_SIZE, rh_CheckpointIoVtable, 72);

/* ---- rh_plugin.h --------------------------------------------------------- */

RH_ABI_PIN_SIZE(rh_NativeTag, 48);
RH_ABI_PIN_OFFSET(rh_NativeTag, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_NativeTag, torch_version, 8);
RH_ABI_PIN_OFFSET(rh_NativeTag, device, 24);
RH_ABI_PIN_OFFSET(rh_NativeTag, cxx11_abi, 40);
/* 44 bytes of fields, 4 of tail padding (alignment of size_t). rh_NativeTag
 * is embedded by value in rh_PluginInfo (offset 48), so its size is frozen
 * for ABI 1: appending a field would move rh_PluginInfo::components. */
RH_ABI_PIN_STRUCT_SIZE_TAIL(RH_NATIVE_TAG_STRUCT_SIZE, rh_NativeTag, 44, 4);

RH_ABI_PIN_SIZE(rh_Component, 56);
RH_ABI_PIN_OFFSET(rh_Component, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_Component, kind, 8);
RH_ABI_PIN_OFFSET(rh_Component, type_name, 16);
RH_ABI_PIN_OFFSET(rh_Component, description, 32);
RH_ABI_PIN_OFFSET(rh_Component, vtable, 48);
RH_ABI_PIN_STRUCT_SIZE(RH_COMPONENT_STRUCT_SIZE, rh_Component, 56);

RH_ABI_PIN_SIZE(rh_InitArgs, 24);
RH_ABI_PIN_OFFSET(rh_InitArgs, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_InitArgs, host, 8);
RH_ABI_PIN_OFFSET(rh_InitArgs, context, 16);
RH_ABI_PIN_STRUCT_SIZE(RH_INIT_ARGS_STRUCT_SIZE, rh_InitArgs, 24);

RH_ABI_PIN_SIZE(rh_PluginInfo, 128);
RH_ABI_PIN_OFFSET(rh_PluginInfo, struct_size, 0);
RH_ABI_PIN_OFFSET(rh_PluginInfo, abi_major, 8);
RH_ABI_PIN_OFFSET(rh_PluginInfo, abi_minor, 12);
RH_ABI_PIN_OFFSET(rh_PluginInfo, name, 16);
RH_ABI_PIN_OFFSET(rh_PluginInfo, version, 32);
RH_ABI_PIN_OFFSET(rh_PluginInfo, native_tag, 48);
RH_ABI_PIN_OFFSET(rh_PluginInfo, components, 96);
RH_ABI_PIN_OFFSET(rh_PluginInfo, num_components, 104);
RH_ABI_PIN_OFFSET(rh_PluginInfo, Init, 112);
RH_ABI_PIN_OFFSET(rh_PluginInfo, Shutdown, 120);
RH_ABI_PIN_STRUCT_SIZE(RH_PLUGIN_INFO_STRUCT_SIZE, rh_PluginInfo, 128);

#else
#define RH_ABI_LAYOUT_PINNED 0
#endif /* LP64 Linux */

#endif /* RH_TESTS_ABI_LAYOUT_ASSERTS_H_ */
