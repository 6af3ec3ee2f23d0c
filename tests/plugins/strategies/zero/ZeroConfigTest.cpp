// ZeroConfig from the job's YAML (parsed by the host's reader and read
// through the real host table, as the plugin will read it) and from a
// DeepSpeed JSON file: defaults, every key, and every error with the
// location and key path it must name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ZeroConfig.hpp"
#include "abi/HostApi.hpp"
#include "common/TestUtil.hpp"
#include "config/ConfigNode.hpp"
#include "config/YamlReader.hpp"

namespace rh::zero {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A job file's `strategy:` map, read through the host's table.
class Job {
 public:
  explicit Job(const std::string& yaml) : root_(config::parse_yaml(yaml, "job.yaml")) {}
  const config::Node& strategy() const { return *root_->find("strategy"); }
  rh::Config config() const {
    return rh::Config(services_.api(), reinterpret_cast<const rh_ConfigNode*>(&strategy()));
  }
  ZeroConfig parse(const std::string& job_dir = "") const {
    return ZeroConfig::from_config(config(), job_dir);
  }

 private:
  host::HostServices services_;
  config::NodePtr root_;
};

std::string yaml_error(const std::string& yaml, const std::string& job_dir = "") {
  try {
    Job(yaml).parse(job_dir);
  } catch (const rh::Exception& e) {
    EXPECT_EQ(e.code(), RH_ERROR_INVALID_CONFIG) << e.what();
    return e.what();
  }
  return "(parsed)";
}

std::string json_error(const std::string& json) {
  try {
    ZeroConfig::from_json(json, "ds.json");
  } catch (const rh::Exception& e) {
    EXPECT_EQ(e.code(), RH_ERROR_INVALID_CONFIG) << e.what();
    return e.what();
  }
  return "(parsed)";
}

// DeepSpeed's defaults: zero/config.py (stage3_param_persistence_threshold
// 1e5, stage3_max_live_parameters 1e9,
// contiguous_gradients and reduce_scatter True, overlap_comm None -> stage
// == 3), precision_config.py (fp16 and bf16 off, loss_scale 0,
// initial_scale_power 16, loss_scale_window 1000, hysteresis 2,
// consecutive_hysteresis False, min_loss_scale 1), constants.py
// (gradient_clipping 0). Not DeepSpeed's 5e8 / 5e8 / 5e7 for
// reduce_bucket_size, allgather_bucket_size and stage3_prefetch_bucket_size:
// unwritten, they are sized from the model's units at Wrap (kFromUnits;
// ZeroTest.UnwrittenSizesAreOneUnit...).
TEST(ZeroConfigTest, DefaultsAreDeepSpeeds) {
  const ZeroConfig c = Job("strategy:\n  type: zero\n  zero_optimization: {stage: 2}\n").parse();
  const ZeroOptimizationConfig& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 2);
  EXPECT_EQ(z.reduce_bucket_size, kFromUnits);
  EXPECT_EQ(z.allgather_bucket_size, kFromUnits);
  EXPECT_EQ(z.reduce_bucket_size_where, "");
  EXPECT_FALSE(z.overlap_comm);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.stage3_prefetch_bucket_size, kFromUnits);
  EXPECT_EQ(z.stage3_param_persistence_threshold, 100000);
  EXPECT_EQ(z.stage3_max_live_parameters, 1000000000);
  EXPECT_FALSE(c.fp16_enabled);
  EXPECT_FALSE(c.bf16_enabled);
  EXPECT_EQ(c.fp16.loss_scale, 0);
  EXPECT_EQ(c.fp16.initial_scale_power, 16);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_FALSE(c.fp16.consecutive_hysteresis);
  EXPECT_EQ(c.fp16.min_loss_scale, 1);
  EXPECT_FALSE(c.inputs_to_half);
  EXPECT_EQ(c.gradient_clipping, 0);
  EXPECT_EQ(c.deepspeed_config, "");
  // overlap_comm_valid: unset means stage == 3.
  EXPECT_TRUE(Job("strategy: {type: zero, zero_optimization: {stage: 3}}")
                  .parse()
                  .zero_optimization.overlap_comm);
  EXPECT_FALSE(Job("strategy: {type: zero, zero_optimization: {stage: 3, overlap_comm: false}}")
                   .parse()
                   .zero_optimization.overlap_comm);
}

const char kEveryKeyYaml[] =
    "strategy:\n"
    "  type: zero\n"
    "  zero_optimization:\n"
    "    stage: 3\n"
    "    reduce_bucket_size: 2e8\n"
    "    allgather_bucket_size: 300000000\n"
    "    overlap_comm: false\n"
    "    contiguous_gradients: false\n"
    "    reduce_scatter: false\n"
    "    stage3_prefetch_bucket_size: 0\n"
    "    stage3_param_persistence_threshold: 1e4\n"
    "    stage3_max_live_parameters: 123456\n"
    "  fp16:\n"
    "    enabled: true\n"
    "    loss_scale: 0\n"
    "    initial_scale_power: 12\n"
    "    loss_scale_window: 500\n"
    "    hysteresis: 3\n"
    "    consecutive_hysteresis: true\n"
    "    min_loss_scale: 0.5\n"
    "  bf16: {enabled: false}\n"
    "  inputs_to_half: true\n"
    "  gradient_clipping: 1.5\n";

const char kEveryKeyJson[] = R"({
  "zero_optimization": {
    "stage": 3,
    "reduce_bucket_size": 2e8,
    "allgather_bucket_size": 300000000,
    "overlap_comm": false,
    "contiguous_gradients": false,
    "reduce_scatter": false,
    "stage3_prefetch_bucket_size": 0,
    "stage3_param_persistence_threshold": 1e4,
    "stage3_max_live_parameters": 123456
  },
  "fp16": {
    "enabled": true,
    "loss_scale": 0,
    "initial_scale_power": 12,
    "loss_scale_window": 500,
    "hysteresis": 3,
    "consecutive_hysteresis": true,
    "min_loss_scale": 0.5
  },
  "bf16": {"enabled": false},
  "inputs_to_half": true,
  "gradient_clipping": 1.5
}
)";

void expect_every_key(const ZeroConfig& c) {
  const ZeroOptimizationConfig& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 3);
  EXPECT_EQ(z.reduce_bucket_size, 200000000);
  EXPECT_EQ(z.allgather_bucket_size, 300000000);
  EXPECT_FALSE(z.overlap_comm);
  EXPECT_FALSE(z.contiguous_gradients);
  EXPECT_FALSE(z.reduce_scatter);
  EXPECT_EQ(z.stage3_prefetch_bucket_size, 0);
  EXPECT_EQ(z.stage3_param_persistence_threshold, 10000);
  EXPECT_EQ(z.stage3_max_live_parameters, 123456);
  EXPECT_TRUE(c.fp16_enabled);
  EXPECT_EQ(c.fp16.loss_scale, 0);
  EXPECT_EQ(c.fp16.initial_scale_power, 12);
  EXPECT_EQ(c.fp16.loss_scale_window, 500);
  EXPECT_EQ(c.fp16.hysteresis, 3);
  EXPECT_TRUE(c.fp16.consecutive_hysteresis);
  EXPECT_EQ(c.fp16.min_loss_scale, 0.5);
  EXPECT_FALSE(c.bf16_enabled);
  EXPECT_TRUE(c.inputs_to_half);
  EXPECT_EQ(c.gradient_clipping, 1.5);
  // The fp16 section is the loss scaler's options.
  EXPECT_EQ(LossScaler(c.fp16).scale(), 4096);
}

TEST(ZeroConfigTest, ReadsEveryKeyFromTheJob) {
  Job job(kEveryKeyYaml);
  expect_every_key(job.parse());
  // Every key it accepts was looked up: the host's unknown-key check (run
  // after Create) has nothing to report.
  EXPECT_TRUE(config::unknown_keys(job.strategy(), {"type", "plugin"}, "strategy 'zero'").empty());
}

TEST(ZeroConfigTest, ReadsEveryKeyFromADeepSpeedJsonFile) {
  expect_every_key(ZeroConfig::from_json(kEveryKeyJson, "ds.json"));
  test::TempDir dir;
  dir.write("conf/ds.json", kEveryKeyJson);
  const ZeroConfig c =
      Job("strategy: {type: zero, deepspeed_config: conf/ds.json}\n").parse(dir.path().string());
  expect_every_key(c);
  EXPECT_EQ(c.deepspeed_config, (dir.path() / "conf/ds.json").string());
}

TEST(ZeroConfigTest, StageMustBeOneTwoOrThree) {
  const std::string head = "strategy:\n  type: zero\n  zero_optimization:\n    stage: ";
  EXPECT_EQ(yaml_error(head + "4\n"),
            "job.yaml:4:12: strategy.zero_optimization.stage: must be 1, 2 or 3, got 4");
  EXPECT_EQ(yaml_error(head + "0\n"),
            "job.yaml:4:12: strategy.zero_optimization.stage: must be 1, 2 or 3, got 0 "
            "(DeepSpeed's 'ZeRO disabled': use strategy: ddp)");
  EXPECT_EQ(yaml_error(head + "1.5\n"),
            "job.yaml:4:12: strategy.zero_optimization.stage: expected a whole number, got 1.5");
  // The host's own type error, located the same way.
  EXPECT_THAT(yaml_error(head + "two\n"),
              StartsWith("job.yaml:4:12: strategy.zero_optimization.stage: expected a number"));
  EXPECT_EQ(yaml_error("strategy:\n  type: zero\n  fp16: {enabled: false}\n"),
            "job.yaml:2:3: strategy: missing zero_optimization.stage (1, 2 or 3)");
  EXPECT_EQ(json_error("{\n  \"zero_optimization\": {\n    \"stage\": 0\n  }\n}\n"),
            "ds.json:3:14: zero_optimization.stage: must be 1, 2 or 3, got 0 (DeepSpeed's 'ZeRO "
            "disabled': use strategy: ddp)");
  EXPECT_EQ(json_error("{\"zero_optimization\": {\"stage\": 4}}"),
            "ds.json:1:33: zero_optimization.stage: must be 1, 2 or 3, got 4");
}

TEST(ZeroConfigTest, NegativeOrFractionalSizesAreErrors) {
  const std::string head = "strategy:\n  type: zero\n  zero_optimization:\n    stage: 2\n";
  EXPECT_EQ(yaml_error(head + "    reduce_bucket_size: -1\n"),
            "job.yaml:5:25: strategy.zero_optimization.reduce_bucket_size: must be > 0 "
            "(elements), got -1");
  EXPECT_EQ(yaml_error(head + "    allgather_bucket_size: 0\n"),
            "job.yaml:5:28: strategy.zero_optimization.allgather_bucket_size: must be > 0 "
            "(elements), got 0");
  EXPECT_EQ(yaml_error(head + "    stage3_prefetch_bucket_size: -5e7\n"),
            "job.yaml:5:34: strategy.zero_optimization.stage3_prefetch_bucket_size: must be >= 0 "
            "(elements, as DeepSpeed counts them), got -50000000");
  EXPECT_THAT(yaml_error(head + "    stage3_max_live_parameters: 2.5\n"),
              HasSubstr("stage3_max_live_parameters: expected a whole number, got 2.5"));
  EXPECT_EQ(json_error("{\"zero_optimization\": {\"stage\": 1, \"reduce_bucket_size\": -8}}"),
            "ds.json:1:58: zero_optimization.reduce_bucket_size: must be > 0 (elements), got -8");
}

TEST(ZeroConfigTest, Fp16AndBf16BothEnabledIsAnError) {
  EXPECT_EQ(yaml_error("strategy:\n  type: zero\n  zero_optimization: {stage: 1}\n"
                       "  fp16: {enabled: true}\n  bf16: {enabled: true}\n"),
            "job.yaml:5:19: strategy.bf16.enabled: fp16 and bf16 are both enabled (fp16.enabled "
            "at job.yaml:4:19: strategy.fp16.enabled): enable one of them");
  EXPECT_THAT(json_error(R"({"zero_optimization": {"stage": 1}, "fp16": {"enabled": true},
                             "bf16": {"enabled": true}})"),
              StartsWith("ds.json:2:50: bf16.enabled: fp16 and bf16 are both enabled"));
}

TEST(ZeroConfigTest, UnimplementedDeepSpeedKeysAreErrorsNamingThem) {
  const std::string head = "strategy:\n  type: zero\n  zero_optimization:\n    stage: 3\n";
  // A value asking for what zero does not do: the error points at the value
  // and says what it asks for, what zero does and what may be written.
  EXPECT_EQ(yaml_error(head + "    offload_optimizer: {device: cpu}\n"),
            "job.yaml:5:33: strategy.zero_optimization.offload_optimizer.device: cpu asks for "
            "offloading the optimizer state to the CPU, which runner-host's zero strategy does "
            "not implement (the optimizer state stays in each rank's device memory): write none "
            "or remove the section");
  EXPECT_THAT(yaml_error(head + "    offload_param: {device: nvme}\n"),
              HasSubstr("strategy.zero_optimization.offload_param.device: nvme asks for "
                        "offloading the parameters to NVMe"));
  EXPECT_EQ(json_error("{\"zero_optimization\": {\"stage\": 3,\n"
                       "  \"zero_quantized_weights\": true}}"),
            "ds.json:2:29: zero_optimization.zero_quantized_weights: true asks for ZeRO++'s "
            "quantized weight all-gather, which runner-host's zero strategy does not implement "
            "(weights are gathered in the working dtype): write false or remove the key");
  EXPECT_THAT(json_error(R"({"zero_optimization": {"stage": 3}, "bf16": {"enabled": true,
                             "immediate_grad_update": false}})"),
              HasSubstr("bf16.immediate_grad_update: false asks for adding the bf16 gradients "
                        "into float32 after the whole backward"));
  EXPECT_THAT(json_error(R"({"zero_optimization": {"stage": 3}, "wall_clock_breakdown": true})"),
              HasSubstr("ds.json:1:61: wall_clock_breakdown: true asks for DeepSpeed's timing "
                        "breakdown in the log"));
  EXPECT_THAT(json_error(R"({"zero_optimization": {"stage": 3}, "tensorboard": {"enabled": true,
                             "output_path": "tb"}})"),
              HasSubstr("tensorboard.enabled: true asks for DeepSpeed's TensorBoard monitor (use "
                        "the tensorboard hook), which runner-host's zero strategy does not "
                        "implement: write false or remove the section"));
  // Keys zero implements in no value: the error points at the key.
  EXPECT_EQ(json_error(R"({"zero_optimization": {"stage": 3}, "pipeline": {"stages": 2}})"),
            "ds.json:1:37: pipeline: DeepSpeed's pipeline (pipeline parallelism) is not "
            "implemented by runner-host's zero strategy (runner-host never ignores a key: remove "
            "it)");
  // Anything else: unknown, with a suggestion or the list.
  EXPECT_EQ(yaml_error(head + "    reduce_bucket_sise: 5\n"),
            "job.yaml:5:25: strategy.zero_optimization.reduce_bucket_sise: unknown key for "
            "strategy 'zero' (did you mean 'reduce_bucket_size'?)");
  EXPECT_THAT(yaml_error(head + "  zero: {}\n"),
              HasSubstr("strategy.zero: unknown key for strategy 'zero' (expected one of: "
                        "deepspeed_config, zero_optimization, fp16, bf16, inputs_to_half, "
                        "gradient_clipping)"));
  EXPECT_EQ(json_error(R"({"zero_optimization": {"stage": 3}, "something_new": 1})"),
            "ds.json:1:37: something_new: not a key runner-host's zero strategy reads (a "
            "DeepSpeed key it does not implement, or a misspelling) (expected one of: "
            "deepspeed_config, zero_optimization, fp16, bf16, inputs_to_half, gradient_clipping)");
}

TEST(ZeroConfigTest, JobKeysSayWhichJobKeyToSet) {
  const std::string head = R"({"zero_optimization": {"stage": 2}, )";
  EXPECT_EQ(json_error(head + R"("train_micro_batch_size_per_gpu": 8})"),
            "ds.json:1:37: train_micro_batch_size_per_gpu: a DeepSpeed key that is a job key in "
            "runner-host: set data.train.batch_size (the batch of one rank) in the job instead "
            "(or write 'auto': the job's value)");
  EXPECT_THAT(json_error(head + R"("train_batch_size": 64})"),
              HasSubstr("train_batch_size: a DeepSpeed key that is a job key in runner-host: set "
                        "data.train.batch_size (per rank; the global batch is batch_size x world "
                        "size x optim_wrapper.accumulative_counts)"));
  EXPECT_THAT(json_error(head + R"("gradient_accumulation_steps": 4})"),
              HasSubstr("set optim_wrapper.accumulative_counts in the job instead"));
  EXPECT_THAT(json_error(head + R"("optimizer": {"type": "AdamW"}})"),
              HasSubstr("set optim_wrapper.optimizer in the job instead"));
  EXPECT_THAT(json_error(head + R"("scheduler": {"type": "WarmupLR"}})"),
              HasSubstr("set param_scheduler in the job instead"));
  EXPECT_EQ(yaml_error("strategy:\n  type: zero\n  zero_optimization: {stage: 2}\n"
                       "  gradient_accumulation_steps: 4\n"),
            "job.yaml:4:32: strategy.gradient_accumulation_steps: a DeepSpeed key that is a job "
            "key in runner-host: set optim_wrapper.accumulative_counts in the job instead (or "
            "write 'auto': the job's value)");
}

TEST(ZeroConfigTest, MissingDeepspeedConfigNamesThePath) {
  test::TempDir dir;
  const std::string error = yaml_error(
      "strategy:\n  type: zero\n  deepspeed_config: nope/ds.json\n", dir.path().string());
  EXPECT_EQ(error,
            "job.yaml:3:21: strategy.deepspeed_config: cannot read the DeepSpeed config "
            "'nope/ds.json' (" +
                (dir.path() / "nope/ds.json").string() + "): No such file or directory");
}

TEST(ZeroConfigTest, InvalidJsonGivesFileLineAndColumn) {
  test::TempDir dir;
  dir.write("ds.json", "{\n  \"zero_optimization\": {\n    \"stage\": 2,\n  }\n}\n");
  const std::string file = (dir.path() / "ds.json").string();
  EXPECT_EQ(yaml_error("strategy: {type: zero, deepspeed_config: ds.json}\n", dir.path().string()),
            file + ":4:3: not valid JSON: trailing comma before '}' is not JSON");
  EXPECT_EQ(json_error("{\"fp16\": {\"enabled\": true}}\n// end\n"),
            "ds.json:2:1: not valid JSON: comments are not JSON (DeepSpeed also reads Hjson; "
            "runner-host reads strict JSON: remove the comment)");
  EXPECT_EQ(json_error("[1]"),
            "ds.json:1:1: a DeepSpeed config must be a JSON object, got an array");
}

TEST(ZeroConfigTest, JsonValueOfTheWrongTypeIsAnError) {
  EXPECT_EQ(json_error("{\"zero_optimization\": {\n  \"stage\": 2,\n  \"overlap_comm\": \"yes\"}}"),
            "ds.json:3:19: zero_optimization.overlap_comm: expected a boolean, got a string "
            "\"yes\"");
  EXPECT_EQ(json_error(R"({"zero_optimization": {"stage": "2"}})"),
            "ds.json:1:33: zero_optimization.stage: expected a number, got a string \"2\"");
  EXPECT_EQ(json_error(R"({"zero_optimization": 3})"),
            "ds.json:1:23: zero_optimization: expected a map");
  EXPECT_EQ(json_error(R"({"zero_optimization": {"stage": 2}, "fp16": {"enabled": "auto"}})"),
            "ds.json:1:57: fp16.enabled: expected a boolean, got a string \"auto\" ('auto' is a "
            "placeholder Hugging Face's Trainer fills in; DeepSpeed itself does not accept it: "
            "write the value)");
  EXPECT_THAT(yaml_error("strategy:\n  type: zero\n  zero_optimization: {stage: 2}\n"
                         "  fp16: {enabled: true, loss_scale: auto}\n"),
              HasSubstr("strategy.fp16.loss_scale: expected a number, got 'auto' ('auto' is a "
                        "placeholder"));
}

TEST(ZeroConfigTest, JobKeysOverrideTheFilesKeyByKey) {
  test::TempDir dir;
  dir.write("ds.json", R"({
  "zero_optimization": {"stage": 2, "reduce_bucket_size": 1000},
  "fp16": {"enabled": true, "hysteresis": 4}
})");
  const ZeroConfig c = Job("strategy:\n  type: zero\n  deepspeed_config: ds.json\n"
                           "  zero_optimization: {stage: 3}\n  fp16: {loss_scale_window: 10}\n")
                           .parse(dir.path().string());
  EXPECT_EQ(c.zero_optimization.stage, 3);                  // the job's
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 1000);  // the file's
  EXPECT_TRUE(c.zero_optimization.overlap_comm);            // default of the final stage
  EXPECT_TRUE(c.fp16_enabled);
  EXPECT_EQ(c.fp16.hysteresis, 4);
  EXPECT_EQ(c.fp16.loss_scale_window, 10);
  // A conflict across the two sources names both places.
  EXPECT_EQ(yaml_error("strategy:\n  type: zero\n  deepspeed_config: ds.json\n"
                       "  bf16: {enabled: true}\n",
                       dir.path().string()),
            "job.yaml:4:19: strategy.bf16.enabled: fp16 and bf16 are both enabled (fp16.enabled "
            "at " +
                (dir.path() / "ds.json").string() + ":3:23: fp16.enabled): enable one of them");
  // A null in the job sets nothing: the file's value stays.
  EXPECT_EQ(Job("strategy:\n  type: zero\n  deepspeed_config: ds.json\n"
                "  zero_optimization: {stage: ~}\n")
                .parse(dir.path().string())
                .zero_optimization.stage,
            2);
}

TEST(ZeroConfigTest, Fp16OptionsOutsideTheScalerRulesAreErrors) {
  const std::string head = "strategy:\n  type: zero\n  zero_optimization: {stage: 1}\n  fp16: ";
  EXPECT_THAT(yaml_error(head + "{enabled: true, loss_scale_window: 0}\n"),
              HasSubstr("job.yaml:4:44: strategy.fp16.loss_scale_window: must be >= 1 (steps), "
                        "got 0"));
  EXPECT_THAT(yaml_error(head + "{enabled: true, hysteresis: 0}\n"),
              HasSubstr("strategy.fp16.hysteresis: must be >= 1"));
  EXPECT_THAT(yaml_error(head + "{enabled: true, min_loss_scale: 0}\n"),
              HasSubstr("strategy.fp16.min_loss_scale: must be > 0"));
  EXPECT_THAT(yaml_error(head + "{enabled: true, loss_scale: -1}\n"),
              HasSubstr("strategy.fp16.loss_scale: must be >= 0 (0 = dynamic loss scaling)"));
  EXPECT_THAT(yaml_error(head + "{enabled: true, initial_scale_power: 200}\n"),
              HasSubstr("strategy.fp16.initial_scale_power: must be <= 127"));
  EXPECT_THAT(yaml_error(head + "{enabled: true, initial_scale_power: 1, min_loss_scale: 4}\n"),
              HasSubstr("strategy.fp16.min_loss_scale: the initial loss scale 2^1 is below "
                        "fp16.min_loss_scale"));
  EXPECT_THAT(yaml_error("strategy:\n  type: zero\n  zero_optimization: {stage: 1}\n"
                         "  inputs_to_half: true\n"),
              HasSubstr("job.yaml:4:19: strategy.inputs_to_half: casts the inputs to the "
                        "half-precision compute dtype, but neither fp16.enabled nor bf16.enabled "
                        "is true"));
  EXPECT_THAT(yaml_error("strategy:\n  type: zero\n  zero_optimization: {stage: 1}\n"
                         "  gradient_clipping: -1\n"),
              HasSubstr("strategy.gradient_clipping: must be >= 0"));
  // A static scale ignores the dynamic keys (as DeepSpeed does) but is valid.
  const ZeroConfig c = Job(head + "{enabled: true, loss_scale: 128}\n").parse();
  EXPECT_FALSE(LossScaler(c.fp16).dynamic());
  EXPECT_EQ(LossScaler(c.fp16).scale(), 128);
}

// MMPretrain's ViT recipe's DeepSpeed block (MMEngine's FlexibleRunner) as
// written, in the job and as a deepspeed_config file (issue 31, item 2): its
// fp16_master_weights_and_grads: false, allgather_partitions: true and
// cpu_offload: false ask for what zero does, and inputs_to_half: [inputs]
// names the batch's input tensor. Refused before (each of the three keys).
const char kVitBlockYaml[] =
    "strategy:\n"
    "  type: zero\n"
    "  fp16: {enabled: true, fp16_master_weights_and_grads: false, loss_scale: 0,\n"
    "         loss_scale_window: 500, hysteresis: 2, min_loss_scale: 1, initial_scale_power: 15}\n"
    "  inputs_to_half: [inputs]\n"
    "  zero_optimization: {stage: 3, allgather_partitions: true, reduce_scatter: true,\n"
    "    allgather_bucket_size: 50000000, reduce_bucket_size: 50000000, overlap_comm: true,\n"
    "    contiguous_gradients: true, cpu_offload: false}\n";

const char kVitBlockJson[] = R"({
  "fp16": {"enabled": true, "fp16_master_weights_and_grads": false, "loss_scale": 0,
           "loss_scale_window": 500, "hysteresis": 2, "min_loss_scale": 1,
           "initial_scale_power": 15},
  "inputs_to_half": ["inputs"],
  "zero_optimization": {"stage": 3, "allgather_partitions": true, "reduce_scatter": true,
                        "allgather_bucket_size": 50000000, "reduce_bucket_size": 50000000,
                        "overlap_comm": true, "contiguous_gradients": true, "cpu_offload": false}
}
)";

void expect_vit_block(const ZeroConfig& c) {
  const ZeroOptimizationConfig& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 3);
  EXPECT_EQ(z.reduce_bucket_size, 50000000);
  EXPECT_EQ(z.allgather_bucket_size, 50000000);
  EXPECT_TRUE(z.overlap_comm);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_TRUE(c.fp16_enabled);
  EXPECT_EQ(c.fp16.loss_scale, 0);
  EXPECT_EQ(c.fp16.loss_scale_window, 500);
  EXPECT_EQ(c.fp16.hysteresis, 2);
  EXPECT_EQ(c.fp16.min_loss_scale, 1);
  EXPECT_EQ(c.fp16.initial_scale_power, 15);
  EXPECT_TRUE(c.inputs_to_half);
}

TEST(ZeroConfigTest, TheMmpretrainVitDeepSpeedBlockIsReadAsWritten) {
  Job job(kVitBlockYaml);
  expect_vit_block(job.parse());
  EXPECT_TRUE(config::unknown_keys(job.strategy(), {"type", "plugin"}, "strategy 'zero'").empty());
  expect_vit_block(ZeroConfig::from_json(kVitBlockJson, "ds.json"));
  test::TempDir dir;
  dir.write("ds.json", kVitBlockJson);
  expect_vit_block(
      Job("strategy: {type: zero, deepspeed_config: ds.json}\n").parse(dir.path().string()));
}

// A DeepSpeed setting zero implements one way: the value asking for that
// way is accepted, any other refused naming what it asks for (issue 31:
// every such key was refused whatever its value).
struct OneWayCase {
  std::string section;  // "" for a top-level key
  std::string key, accepted, refused, asks;
};

std::string one_way_yaml(const OneWayCase& c, const std::string& value) {
  const std::string head = "strategy:\n  type: zero\n";
  if (c.section == "zero_optimization")
    return head + "  zero_optimization: {stage: 3, " + c.key + ": " + value + "}\n";
  const std::string zero = "  zero_optimization: {stage: 3}\n";
  if (c.section.empty()) return head + zero + "  " + c.key + ": " + value + "\n";
  return head + zero + "  " + c.section + ": {enabled: true, " + c.key + ": " + value + "}\n";
}

TEST(ZeroConfigTest, AValueAskingForWhatZeroDoesIsAcceptedAndAnyOtherRefused) {
  const std::string z = "zero_optimization";
  for (const OneWayCase& c : std::vector<OneWayCase>{
           {z, "cpu_offload", "false", "true", "CPU offload of the optimizer state"},
           {z, "cpu_offload_param", "false", "true", "CPU offload of the parameters"},
           {z, "cpu_offload_use_pin_memory", "false", "true", "pinned host memory"},
           {z, "round_robin_gradients", "false", "true", "round-robin gradient copies"},
           {z, "allgather_partitions", "true", "false", "a series of broadcasts"},
           {z, "use_multi_rank_bucket_allreduce", "true", "false", "a reduce per rank"},
           {z, "load_from_fp32_weights", "true", "false", "masters taken from the 16-bit"},
           {z, "ignore_unused_parameters", "true", "false", "an error for a parameter"},
           {z, "legacy_stage1", "false", "true", "DeepSpeed's legacy stage 1"},
           {z, "memory_efficient_linear", "true", "false", "linear layers that keep"},
           {z, "override_module_apply", "true", "false", "nn.Module.apply on partitioned"},
           {z, "pipeline_loading_checkpoint", "false", "true", "pipelined checkpoint loading"},
           {z, "zero_quantized_weights", "false", "true", "ZeRO++'s quantized weight"},
           {z, "zero_quantized_nontrainable_weights", "false", "true", "ZeRO++'s quantized frozen"},
           {z, "zero_quantized_gradients", "false", "true", "ZeRO++'s quantized gradient"},
           {z, "zeropp_loco_param", "~", "{err_beta: 0.8}", "ZeRO++'s LoCo error feedback"},
           {z, "zero_hpz_partition_size", "1", "8", "ZeRO++'s hierarchical partitioning"},
           {z, "mics_shard_size", "-1", "4", "MiCS (parameters sharded within groups"},
           {z, "mics_hierarchical_params_gather", "false", "true", "MiCS's hierarchical"},
           {z, "stage3_use_all_reduce_for_fetch_params", "false", "true", "an all-reduce to fetch"},
           {z, "stage3_gather_16bit_weights_on_model_save", "true", "false", "checkpoints without"},
           {z, "stage3_gather_fp16_weights_on_model_save", "true", "false", "checkpoints without"},
           {z, "stage3_module_granularity_threshold", "0", "100", "gathering fine-grained"},
           {z, "stage3_max_reuse_distance", "0", "1e9", "keeping a gathered unit"},
           {z, "stage3_model_persistence_threshold", "9223372036854775807", "1e6",
            "a cap on the elements"},
           {z, "sub_group_size", "1e9", "1000000", "the stage 3 optimizer step tiled"},
           {"fp16", "fp16_master_weights_and_grads", "false", "true",
            "fp16 master weights and gradients"},
           {"fp16", "raise_error_at_min_scale", "true", "false", "training on after an overflow"},
           {"bf16", "immediate_grad_update", "true", "false", "adding the bf16 gradients"},
           {"bf16", "check_grad_overflow", "false", "true", "an inf/nan check of the bf16"},
           {"", "communication_data_type", "fp32", "bf16", "gradients reduced in that dtype"},
           {"", "prescale_gradients", "false", "true", "gradients scaled before the reduction"},
           {"", "gradient_predivide_factor", "1.0", "2", "another gradient pre-division"},
           {"", "sparse_gradients", "false", "true", "sparse gradients"},
           {"", "wall_clock_breakdown", "false", "true", "DeepSpeed's timing breakdown"},
           {"", "memory_breakdown", "false", "true", "DeepSpeed's memory report"},
           {"", "dump_state", "false", "true", "a dump of DeepSpeed's engine state"}}) {
    SCOPED_TRACE(c.key);
    Job job(one_way_yaml(c, c.accepted));
    EXPECT_NO_THROW(job.parse());
    EXPECT_TRUE(
        config::unknown_keys(job.strategy(), {"type", "plugin"}, "strategy 'zero'").empty());
    const std::string path = "strategy." + (c.section.empty() ? "" : c.section + ".") + c.key;
    const std::string shown = c.refused.front() == '{' ? "a map" : c.refused;
    EXPECT_THAT(yaml_error(one_way_yaml(c, c.refused)),
                HasSubstr(path + ": " + shown + " asks for " + c.asks));
    EXPECT_THAT(yaml_error(one_way_yaml(c, c.refused)),
                HasSubstr(", which runner-host's zero strategy does not implement ("));
  }
  // Both values ask for nothing zero does not do.
  for (const char* key :
       {"fp32_allreduce", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer"})
    for (const char* value : {"true", "false"})
      EXPECT_NO_THROW(Job(one_way_yaml({"", key, "", "", ""}, value)).parse()) << key;
  for (const char* value : {"true", "false"})
    EXPECT_NO_THROW(Job(one_way_yaml({z, "elastic_checkpoint", "", "", ""}, value)).parse());
  // Offload to `none` is no offload; its other keys tune nothing then.
  const std::string s3 = "strategy:\n  type: zero\n  zero_optimization:\n    stage: 3\n";
  Job none(s3 +
           "    offload_optimizer: {device: none, pin_memory: true, buffer_count: 4, "
           "fast_init: false, ratio: 1.0}\n    offload_param: {device: none, "
           "max_in_cpu: 1e9}\n");
  EXPECT_NO_THROW(none.parse());
  EXPECT_TRUE(config::unknown_keys(none.strategy(), {"type", "plugin"}, "strategy 'zero'").empty());
  EXPECT_THAT(yaml_error(s3 + "    offload_param: {device: none, pin_memmory: true}\n"),
              HasSubstr("offload_param.pin_memmory: unknown key for strategy 'zero' (did you "
                        "mean 'pin_memory'?)"));
  EXPECT_THAT(yaml_error(s3 + "    offload_optimizer: {device: gpu}\n"),
              HasSubstr("offload_optimizer.device: expected none, cpu or nvme, got gpu"));
  // Sections switched off ask for nothing; their other keys have no effect.
  Job off(s3 +
          "  tensorboard: {enabled: false, output_path: tb, job_name: x}\n"
          "  amp: {enabled: false, opt_level: O1}\n"
          "  flops_profiler: {enabled: false, profile_step: 1}\n"
          "  activation_checkpointing: {partition_activations: false, "
          "cpu_checkpointing: false, number_checkpoints: ~}\n"
          "  aio: {block_size: 1048576, queue_depth: 8, single_submit: false}\n");
  EXPECT_NO_THROW(off.parse());
  EXPECT_TRUE(config::unknown_keys(off.strategy(), {"type", "plugin"}, "strategy 'zero'").empty());
  EXPECT_THAT(yaml_error(s3 + "  amp: {enabled: true}\n"),
              HasSubstr("strategy.amp.enabled: true asks for NVIDIA Apex AMP (use fp16 or bf16)"));
  const std::string ac =
      yaml_error(s3 + "  activation_checkpointing: {partition_activations: true}\n");
  EXPECT_THAT(ac, HasSubstr("strategy.activation_checkpointing.partition_activations: true asks "
                            "for DeepSpeed's activation checkpointing"));
  EXPECT_THAT(ac, HasSubstr("the job's top-level activation_checkpoint: {mode: full} recomputes "
                            "every unit under any strategy"));
  // The same rule in a DeepSpeed file, pointing into it.
  EXPECT_EQ(json_error("{\"zero_optimization\": {\"stage\": 3,\n  \"cpu_offload\": true}}"),
            "ds.json:2:18: zero_optimization.cpu_offload: true asks for CPU offload of the "
            "optimizer state (DeepSpeed's old name for offload_optimizer: {device: cpu}), which "
            "runner-host's zero strategy does not implement (the optimizer state stays in each "
            "rank's device memory): write false or remove the key");
}

// DeepSpeed's other names for the same settings: bfloat16 (bf16's old
// name), the stage3_* keys under their field names; both names at once are
// an error naming both places.
TEST(ZeroConfigTest, DeepSpeedsOtherNamesAreTheSameKeys) {
  const std::string s3 = "strategy:\n  type: zero\n  zero_optimization:\n    stage: 3\n";
  EXPECT_TRUE(Job(s3 + "  bfloat16: {enabled: true}\n").parse().bf16_enabled);
  EXPECT_EQ(yaml_error(s3 + "  bf16: {enabled: true}\n  bfloat16: {enabled: true}\n"),
            "job.yaml:6:13: strategy.bfloat16: DeepSpeed's old name for bf16, which is set too (at "
            "job.yaml:5:9: strategy.bf16): write bf16 only");
  const ZeroConfig c = Job(s3 +
                           "    prefetch_bucket_size: 7\n    param_persistence_threshold: 8\n"
                           "    max_live_parameters: 9\n")
                           .parse();
  EXPECT_EQ(c.zero_optimization.stage3_prefetch_bucket_size, 7);
  EXPECT_EQ(c.zero_optimization.stage3_param_persistence_threshold, 8);
  EXPECT_EQ(c.zero_optimization.stage3_max_live_parameters, 9);
  EXPECT_EQ(
      yaml_error(s3 + "    stage3_prefetch_bucket_size: 7\n    prefetch_bucket_size: 8\n"),
      "job.yaml:6:27: strategy.zero_optimization.prefetch_bucket_size: DeepSpeed's other name "
      "for stage3_prefetch_bucket_size, which is set too (at job.yaml:5:34: "
      "strategy.zero_optimization.stage3_prefetch_bucket_size): write one of them");
  EXPECT_THAT(yaml_error(s3 + "    max_reuse_distance: 5\n"),
              HasSubstr("strategy.zero_optimization.max_reuse_distance: 5 asks for keeping a "
                        "gathered unit"));
  // fp16.auto_cast casts the inputs to fp16, as inputs_to_half does (read
  // with fp16 on, as in DeepSpeed).
  const std::string fp16 = s3 + "  fp16: {enabled: true, auto_cast: true}\n";
  EXPECT_TRUE(Job(fp16).parse().inputs_to_half);
  EXPECT_FALSE(Job(s3 + "  fp16: {enabled: false, auto_cast: true}\n").parse().inputs_to_half);
  EXPECT_EQ(yaml_error(fp16 + "  inputs_to_half: false\n"),
            "job.yaml:5:36: strategy.fp16.auto_cast: casts the inputs to fp16 (DeepSpeed's "
            "auto_cast, what inputs_to_half does), but inputs_to_half is false (at job.yaml:6:19: "
            "strategy.inputs_to_half): set one of them");
}

// MMEngine's inputs_to_half is a list of the inputs to cast: runner-host
// casts the batch's input tensor, MMEngine's `inputs` (index 0 of a tuple).
// Refused before ("expected a boolean").
TEST(ZeroConfigTest, InputsToHalfTakesMmenginesListOfInputNames) {
  const std::string head =
      "strategy:\n  type: zero\n  zero_optimization: {stage: 2}\n  bf16: {enabled: true}\n"
      "  inputs_to_half: ";
  EXPECT_TRUE(Job(head + "[inputs]\n").parse().inputs_to_half);
  EXPECT_TRUE(Job(head + "[0]\n").parse().inputs_to_half);
  EXPECT_FALSE(Job(head + "[]\n").parse().inputs_to_half);
  EXPECT_TRUE(Job(head + "true\n").parse().inputs_to_half);
  EXPECT_EQ(yaml_error(head + "[inputs, data_samples]\n"),
            "job.yaml:5:28: strategy.inputs_to_half.1: 'data_samples' is not an input "
            "runner-host casts: it casts the batch's input tensor, MMEngine's 'inputs' (index 0 "
            "of a tuple batch); the targets stay as they are");
  EXPECT_THAT(yaml_error("strategy:\n  type: zero\n  zero_optimization: {stage: 2}\n"
                         "  inputs_to_half: [inputs]\n"),
              HasSubstr("job.yaml:4:19: strategy.inputs_to_half: casts the inputs to the "
                        "half-precision compute dtype, but neither fp16.enabled nor bf16.enabled "
                        "is true"));
  const std::string json = R"({"zero_optimization": {"stage": 2}, "bf16": {"enabled": true}, )";
  EXPECT_TRUE(
      ZeroConfig::from_json(json + R"("inputs_to_half": ["inputs"]})", "ds.json").inputs_to_half);
  EXPECT_TRUE(ZeroConfig::from_json(json + R"("inputs_to_half": [0]})", "ds.json").inputs_to_half);
  EXPECT_EQ(json_error(json + R"("inputs_to_half": ["img"]})"),
            "ds.json:1:83: inputs_to_half.0: 'img' is not an input runner-host casts: it casts "
            "the batch's input tensor, MMEngine's 'inputs' (index 0 of a tuple batch); the "
            "targets stay as they are");
}

// DeepSpeed's "auto" (Hugging Face's placeholder for the trainer's value):
// in zero_optimization DeepSpeed's default, as DeepSpeed's config model
// reads it; gradient_clipping the job's clip_grad (zero clips nothing
// itself); the batch and accumulation keys the job's. Refused before.
TEST(ZeroConfigTest, AutoIsTheJobsValueOrDeepSpeedsDefault) {
  const ZeroConfig c = ZeroConfig::from_json(R"({
  "train_micro_batch_size_per_gpu": "auto",
  "train_batch_size": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "none", "pin_memory": true},
    "offload_param": {"device": "none", "pin_memory": true},
    "overlap_comm": "auto",
    "contiguous_gradients": "auto",
    "reduce_scatter": "auto",
    "sub_group_size": "auto",
    "reduce_bucket_size": "auto",
    "allgather_bucket_size": "auto",
    "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto",
    "stage3_max_live_parameters": "auto",
    "stage3_gather_16bit_weights_on_model_save": true,
    "cpu_offload": "auto"
  }
})",
                                             "ds.json");
  const ZeroOptimizationConfig& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 3);
  EXPECT_TRUE(z.overlap_comm);  // DeepSpeed's default at stage 3
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.reduce_bucket_size, kFromUnits);  // "auto": as not written
  EXPECT_EQ(z.allgather_bucket_size, kFromUnits);
  EXPECT_EQ(z.stage3_prefetch_bucket_size, kFromUnits);
  EXPECT_EQ(z.stage3_param_persistence_threshold, 100000);
  EXPECT_EQ(z.stage3_max_live_parameters, 1000000000);
  EXPECT_EQ(c.gradient_clipping, 0);
  EXPECT_TRUE(c.bf16_enabled);
  // The same in the job.
  Job job(
      "strategy:\n  type: zero\n  zero_optimization: {stage: 2, reduce_bucket_size: auto}\n"
      "  gradient_clipping: auto\n  gradient_accumulation_steps: auto\n");
  EXPECT_EQ(job.parse().zero_optimization.reduce_bucket_size, kFromUnits);
  EXPECT_TRUE(config::unknown_keys(job.strategy(), {"type", "plugin"}, "strategy 'zero'").empty());
  // The job's gradient_clipping: auto over the file's value.
  test::TempDir dir;
  dir.write("ds.json", R"({"zero_optimization": {"stage": 1}, "gradient_clipping": 1.0})");
  EXPECT_EQ(Job("strategy: {type: zero, deepspeed_config: ds.json, gradient_clipping: auto}\n")
                .parse(dir.path().string())
                .gradient_clipping,
            0);
  // Where DeepSpeed's default is not what zero does, or "auto" has no value
  // to take, it is refused.
  EXPECT_EQ(json_error(R"({"zero_optimization": {"stage": "auto"}})"),
            "ds.json:1:33: zero_optimization.stage: 'auto' would be DeepSpeed's default 0, ZeRO "
            "disabled: write 1, 2 or 3");
  EXPECT_THAT(
      json_error(R"({"zero_optimization": {"stage": 3, "stage3_max_reuse_distance": "auto"}})"),
      HasSubstr("zero_optimization.stage3_max_reuse_distance: 'auto' is DeepSpeed's "
                "default here, which asks for keeping a gathered unit"));
  EXPECT_THAT(json_error(R"({"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}})"),
              HasSubstr("bf16.enabled: expected a boolean, got a string \"auto\" ('auto' is a "
                        "placeholder"));
}

}  // namespace
}  // namespace rh::zero
