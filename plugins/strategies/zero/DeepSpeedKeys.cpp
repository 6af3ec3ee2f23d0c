#include "DeepSpeedKeys.hpp"

#include <utility>

namespace rh::zero::detail {
namespace {

OneWay must_be(bool want, std::string asks, std::string does, bool default_matches = true) {
  return {[want](const View& v) { return v.as_bool() == want; }, want ? "true" : "false",
          std::move(asks), std::move(does), default_matches};
}

// Either value asks for nothing zero does not do.
OneWay any_bool() {
  return {[](const View& v) {
            static_cast<void>(v.as_bool());
            return true;
          },
          "true or false", "", ""};
}

OneWay number_where(std::function<bool(double)> ok, std::string accepted, std::string asks,
                    std::string does, bool default_matches = true) {
  return {[ok](const View& v) { return ok(v.as_number()); }, std::move(accepted), std::move(asks),
          std::move(does), default_matches};
}

}  // namespace

const std::map<std::string, std::string>& job_keys() {
  static const std::map<std::string, std::string> keys = {
      {"train_micro_batch_size_per_gpu", "data.train.batch_size (the batch of one rank)"},
      {"train_batch_size",
       "data.train.batch_size (per rank; the global batch is batch_size x world size x "
       "optim_wrapper.accumulative_counts)"},
      {"gradient_accumulation_steps", "optim_wrapper.accumulative_counts"},
      {"optimizer", "optim_wrapper.optimizer"},
      {"scheduler", "param_scheduler"},
  };
  return keys;
}

const OneWayTable& one_way_zero_keys() {
  static const std::string no_offload = "there is no CPU offload";
  static const std::string gathered_whole =
      "rank 0 always writes the whole model, gathered one unit at a time";
  static const OneWayTable keys = {
      {"cpu_offload", must_be(false,
                              "CPU offload of the optimizer state (DeepSpeed's old name for "
                              "offload_optimizer: {device: cpu})",
                              "the optimizer state stays in each rank's device memory")},
      {"cpu_offload_param", must_be(false, "CPU offload of the parameters",
                                    "each rank's partitions stay in its device memory")},
      {"cpu_offload_use_pin_memory",
       must_be(false, "pinned host memory for CPU offload", no_offload)},
      {"round_robin_gradients",
       must_be(false, "round-robin gradient copies for CPU offload", no_offload)},
      {"allgather_partitions",
       must_be(true, "a series of broadcasts to gather the updated partitions",
               "the updated partitions are all-gathered, in allgather_bucket_size pieces")},
      {"use_multi_rank_bucket_allreduce",
       must_be(true, "a reduce per rank instead of one all-reduce of the combined buckets",
               "with reduce_scatter: false each group is all-reduced whole")},
      {"load_from_fp32_weights", must_be(true, "masters taken from the 16-bit weights on resume",
                                         "a resume reads the float32 masters from the checkpoint")},
      {"elastic_checkpoint", any_bool()},  // zero's checkpoints resume on any world size
      {"ignore_unused_parameters", must_be(true, "an error for a parameter that gets no gradient",
                                           "a parameter without a gradient counts as zeros")},
      {"legacy_stage1", must_be(false, "DeepSpeed's legacy stage 1 implementation",
                                "stage 1 is DeepSpeed's current one")},
      {"memory_efficient_linear",
       must_be(true, "linear layers that keep their gathered weight until backward",
               "stage 3 frees a unit's gathered weights after its forward and gathers them "
               "again for its backward")},
      {"override_module_apply",
       must_be(true, "nn.Module.apply on partitioned parameters",
               "the model is built and initialised whole, then partitioned")},
      {"pipeline_loading_checkpoint",
       must_be(false, "pipelined checkpoint loading", "each rank reads the ranges it needs")},
      {"zero_quantized_weights", must_be(false, "ZeRO++'s quantized weight all-gather",
                                         "weights are gathered in the working dtype")},
      {"zero_quantized_nontrainable_weights",
       must_be(false, "ZeRO++'s quantized frozen weights",
               "frozen weights stay whole in the working dtype")},
      {"zero_quantized_gradients",
       must_be(false, "ZeRO++'s quantized gradient reduction", "gradients are reduced in float32")},
      {"zeropp_loco_param",
       {[](const View&) { return false; }, "null", "ZeRO++'s LoCo error feedback",
        "gradients are reduced in float32, unquantized"}},
      {"zero_hpz_partition_size",
       number_where([](double n) { return n <= 1; }, "1",
                    "ZeRO++'s hierarchical partitioning (a secondary copy of the weights per "
                    "group of ranks)",
                    "each rank holds only its own partition")},
      {"mics_shard_size", number_where([](double n) { return n <= 0; }, "-1",
                                       "MiCS (parameters sharded within groups of ranks)",
                                       "the parameters are sharded over every rank")},
      {"mics_hierarchical_params_gather",
       must_be(false, "MiCS's hierarchical all-gather", "there is no MiCS")},
      {"stage3_use_all_reduce_for_fetch_params",
       must_be(false, "an all-reduce to fetch stage 3 parameters",
               "stage 3 all-gathers each unit")},
      {"stage3_gather_16bit_weights_on_model_save",
       must_be(true, "checkpoints without the gathered weights", gathered_whole, false)},
      {"stage3_gather_fp16_weights_on_model_save",
       must_be(true, "checkpoints without the gathered weights", gathered_whole, false)},
      {"stage3_module_granularity_threshold",
       number_where([](double n) { return n == 0; }, "0", "gathering fine-grained modules as one",
                    "stage 3 gathers the model's own units")},
      {"stage3_max_reuse_distance",
       number_where([](double n) { return n == 0; }, "0",
                    "keeping a gathered unit that is used again within that many elements",
                    "stage 3 frees every unit after its forward and gathers it again for its "
                    "backward",
                    false)},
      {"stage3_model_persistence_threshold",
       number_where([](double n) { return n >= 9007199254740992.0; },
                    "9223372036854775807 (no cap, DeepSpeed's default)",
                    "a cap on the elements that stage3_param_persistence_threshold keeps whole",
                    "every parameter under that threshold stays whole, uncapped")},
  };
  return keys;
}

const std::map<std::string, std::string>& zero_synonyms() {
  static const std::map<std::string, std::string> keys = {
      {"prefetch_bucket_size", "stage3_prefetch_bucket_size"},
      {"param_persistence_threshold", "stage3_param_persistence_threshold"},
      {"max_live_parameters", "stage3_max_live_parameters"},
      {"model_persistence_threshold", "stage3_model_persistence_threshold"},
      {"max_reuse_distance", "stage3_max_reuse_distance"},
      {"gather_16bit_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save"},
      {"module_granularity_threshold", "stage3_module_granularity_threshold"},
      {"use_all_reduce_for_fetch_params", "stage3_use_all_reduce_for_fetch_params"},
  };
  return keys;
}

const OneWayTable& one_way_fp16_keys() {
  static const OneWayTable keys = {
      {"fp16_master_weights_and_grads",
       must_be(false, "fp16 master weights and gradients",
               "the masters and the gradients the optimizer reads are always float32")},
      {"raise_error_at_min_scale",
       must_be(true, "training on after an overflow at min_loss_scale",
               "an overflow at min_loss_scale stops the run, naming the step")},
  };
  return keys;
}

const OneWayTable& one_way_bf16_keys() {
  static const OneWayTable keys = {
      {"immediate_grad_update",
       must_be(true, "adding the bf16 gradients into float32 after the whole backward",
               "each gradient is added into its float32 gradient as it arrives", false)},
      {"check_grad_overflow",
       must_be(false, "an inf/nan check of the bf16 gradients that skips the step",
               "bf16 steps are never skipped: no loss scale, no overflow check")},
  };
  return keys;
}

const OneWayTable& one_way_top_keys() {
  static const OneWayTable keys = {
      {"communication_data_type",
       {[](const View& v) { return v.as_string() == "fp32"; }, "fp32",
        "gradients reduced in that dtype", "gradients are reduced in float32"}},
      {"prescale_gradients",
       must_be(false, "gradients scaled before the reduction (DeepSpeed's ZeRO refuses it too)",
               "gradients are averaged as DeepSpeed's ZeRO averages them")},
      {"gradient_predivide_factor",
       number_where([](double f) { return f == 1; }, "1",
                    "another gradient pre-division (DeepSpeed's ZeRO refuses it too)",
                    "gradients are averaged as DeepSpeed's ZeRO averages them")},
      {"fp32_allreduce", any_bool()},  // DeepSpeed's ZeRO does not read it; zero reduces in fp32
      {"zero_allow_untested_optimizer", any_bool()},  // zero takes every host optimizer
      {"zero_force_ds_cpu_optimizer", any_bool()},    // acts with CPU offload only
      {"sparse_gradients", must_be(false, "sparse gradients", "every gradient is dense")},
      {"wall_clock_breakdown", must_be(false, "DeepSpeed's timing breakdown in the log",
                                       "the profiler hook times the steps")},
      {"memory_breakdown", must_be(false, "DeepSpeed's memory report in the log",
                                   "the metrics hook reports memory_mb and zero/*_bytes")},
      {"dump_state", must_be(false, "a dump of DeepSpeed's engine state", "there is no engine")},
  };
  return keys;
}

const std::map<std::string, std::string>& switched_sections() {
  static const std::map<std::string, std::string> sections = {
      {"amp", "NVIDIA Apex AMP (use fp16 or bf16)"},
      {"flops_profiler", "DeepSpeed's flops profiler (the profiler hook traces the steps)"},
      {"tensorboard", "DeepSpeed's TensorBoard monitor (use the tensorboard hook)"},
      {"wandb", "DeepSpeed's Weights & Biases monitor"},
      {"csv_monitor", "DeepSpeed's CSV monitor (the metrics hook writes metrics.jsonl)"},
      {"comms_logger", "DeepSpeed's communication logger"},
      {"elasticity", "DeepSpeed's elastic training"},
      {"data_efficiency", "DeepSpeed's data efficiency library"},
      {"curriculum_learning", "DeepSpeed's curriculum learning"},
      {"autotuning", "DeepSpeed's autotuner"},
      {"progressive_layer_drop", "DeepSpeed's progressive layer drop"},
  };
  return sections;
}

const HintTable& unimplemented_top_keys() {
  static const HintTable keys = {
      {"steps_per_print", " (the logger hook's interval does this)"},
      {"pipeline", " (pipeline parallelism)"},
      {"checkpoint", " (checkpoints are the job's hooks and checkpoint_io)"},
      {"compression_training", ""},
      {"sparse_attention", ""},
  };
  return keys;
}

}  // namespace rh::zero::detail
