// ZeroConfig — the zero strategy's configuration, with DeepSpeed's key names
// and defaults (deepspeed/runtime/zero/config.py, runtime/precision_config.py,
// runtime/constants.py), read from the job's `strategy:` map (through the
// SDK's rh::Config) and from a DeepSpeed JSON file (`deepspeed_config:`)
// by one validator, so both give the same rules and the same messages. Every
// error names where the value was written and its key path as the user wrote
// it: "job.yaml:4:12: strategy.zero_optimization.stage: ..." or
// "ds.json:3:14: zero_optimization.stage: ...".
//
//   strategy:
//     type: zero
//     deepspeed_config: ds.json        # optional; relative to the job file's directory
//     zero_optimization: {stage: 2, reduce_bucket_size: 5e8, ...}
//     fp16: {enabled: true, ...}       # or bf16: {enabled: true}
//     inputs_to_half: true             # or MMEngine's list of input names: [inputs]
//     gradient_clipping: 1.0
//
// The rules (also in the report for the README):
// - The file is read first; the job's keys then override the same keys of the
//   file one by one (so `--set strategy.zero_optimization.stage=3` works with
//   a file). Null means "not set".
// - zero_optimization.stage is required: 1, 2 or 3.
// - Sizes are element counts, as DeepSpeed counts them; 5e8 is accepted (any
//   integral number up to 2^53). reduce_bucket_size and allgather_bucket_size
//   must be > 0; stage3_prefetch_bucket_size, stage3_param_persistence_threshold
//   (default 100000) and stage3_max_live_parameters (1000000000) must be >= 0
//   (DeepSpeed's field names prefetch_bucket_size, ... are the same keys).
//   reduce_bucket_size, allgather_bucket_size and stage3_prefetch_bucket_size
//   not written (or "auto") are kFromUnits: the strategy sizes them from the
//   model's units at Wrap (ZeroStrategy::resolve_sizes), not from DeepSpeed's
//   5e8 / 5e8 / 5e7, which were chosen for 10^9 parameters and below that hold
//   the whole model's gradient in one buffer and gather every unit at once
//   (issue 39). overlap_comm
//   defaults to true at stage 3 and false otherwise (DeepSpeed's validator);
//   contiguous_gradients and reduce_scatter default to true.
// - fp16: enabled false, loss_scale 0 (dynamic; > 0 static),
//   initial_scale_power 16 (0..127), loss_scale_window 1000 (>= 1),
//   hysteresis 2 (>= 1), consecutive_hysteresis false, min_loss_scale 1
//   (> 0, and <= 2^initial_scale_power), auto_cast false (true: the inputs
//   cast, as inputs_to_half). bf16 (or its old name bfloat16): enabled false.
//   Both enabled is an error. inputs_to_half (default false; MMEngine's list
//   [inputs] or [0] is true, [] false, other names an error) needs one of
//   them.
// - gradient_clipping: max global norm, 0 (default) = off; >= 0.
// - "auto" (Hugging Face's placeholder): in zero_optimization DeepSpeed's
//   default, as DeepSpeed's config model reads it; gradient_clipping: auto
//   is the job's optim_wrapper.clip_grad (zero clips nothing itself);
//   train_micro_batch_size_per_gpu, train_batch_size and
//   gradient_accumulation_steps: auto are the job's data.train.batch_size and
//   optim_wrapper.accumulative_counts. Any other "auto" is an error.
// - Keys of a mode that is off (stage3_* below stage 3, the fp16 keys with
//   fp16 off or a static scale, sections with enabled: false) are validated
//   and have no effect, as in DeepSpeed.
// - A DeepSpeed setting zero implements one way only (allgather_partitions,
//   cpu_offload, offload_optimizer.device, fp16_master_weights_and_grads,
//   ZeRO++ switches, ...: the OneWay tables in DeepSpeedKeys.cpp) is accepted
//   with the value that asks for what zero does and refused with any other,
//   naming what that value asks for and what zero does instead.
// - Every other key is an error naming it: a DeepSpeed key runner-host does
//   not implement (pipeline, checkpoint ...), a DeepSpeed key that is a job
//   key in runner-host (with the job key to set), or an unknown key (with a
//   "did you mean").
//
// The reader is three files: ZeroConfig.cpp validates and resolves (the
// keys zero reads, their rules, the defaults), DeepSpeedKeys the tables of
// the DeepSpeed keys it knows otherwise, ZeroConfigView the two sources as
// one View.
#pragma once

#include <cstdint>
#include <string>

#include "LossScaler.hpp"
#include "rh/cpp/config.hpp"

namespace rh::zero {

// A size the job did not write: sized from the model's units at Wrap.
constexpr int64_t kFromUnits = -1;

struct ZeroOptimizationConfig {
  int stage = 0;  // 1, 2 or 3 once parsed
  int64_t reduce_bucket_size = kFromUnits;
  int64_t allgather_bucket_size = kFromUnits;
  bool overlap_comm = false;  // resolved: stage == 3 unless set
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t stage3_prefetch_bucket_size = kFromUnits;
  int64_t stage3_param_persistence_threshold = 100000;
  int64_t stage3_max_live_parameters = 1000000000;
  // Where a written size was written ("job.yaml:5:9: strategy.zero_optimization.
  // reduce_bucket_size"), for the warning when it cancels a stage's saving;
  // empty when not written.
  std::string reduce_bucket_size_where;
  std::string stage3_prefetch_bucket_size_where;
};

struct ZeroConfig {
  ZeroOptimizationConfig zero_optimization;
  bool fp16_enabled = false;
  LossScalerOptions fp16;  // the loss scaler's options (used when fp16_enabled)
  bool bf16_enabled = false;
  bool inputs_to_half = false;
  double gradient_clipping = 0;
  std::string deepspeed_config;  // the file read, as resolved; empty if none

  // The job's `strategy:` map. `job_dir` is the directory a relative
  // deepspeed_config is taken from (the job file's). Throws rh::Exception
  // (RH_ERROR_INVALID_CONFIG). Looks up every key it accepts, so the host's
  // unknown-key check has nothing left to report.
  static ZeroConfig from_config(const rh::Config& strategy, const std::string& job_dir);

  // A DeepSpeed JSON document alone; `file` names it in errors.
  static ZeroConfig from_json(const std::string& text, const std::string& file);
};

}  // namespace rh::zero
