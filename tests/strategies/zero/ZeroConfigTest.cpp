// ZeroConfig from the job's YAML (parsed by the host's reader and read
// through the real host table, as the plugin will read it) and from a
// DeepSpeed JSON file: defaults, every key, and every error with the
// location and key path it must name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "ZeroConfig.hpp"
#include "common/TestUtil.hpp"
#include "config/ConfigNode.hpp"
#include "config/YamlReader.hpp"
#include "plugins/HostApi.hpp"

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

// DeepSpeed's defaults: zero/config.py (reduce_bucket_size and
// allgather_bucket_size pp_int(5e8), stage3_prefetch_bucket_size 5e7,
// stage3_param_persistence_threshold 1e5, stage3_max_live_parameters 1e9,
// contiguous_gradients and reduce_scatter True, overlap_comm None -> stage
// == 3), precision_config.py (fp16 and bf16 off, loss_scale 0,
// initial_scale_power 16, loss_scale_window 1000, hysteresis 2,
// consecutive_hysteresis False, min_loss_scale 1), constants.py
// (gradient_clipping 0).
TEST(ZeroConfigTest, DefaultsAreDeepSpeeds) {
  const ZeroConfig c = Job("strategy:\n  type: zero\n  zero_optimization: {stage: 2}\n").parse();
  const ZeroOptimizationConfig& z = c.zero_optimization;
  EXPECT_EQ(z.stage, 2);
  EXPECT_EQ(z.reduce_bucket_size, 500000000);
  EXPECT_EQ(z.allgather_bucket_size, 500000000);
  EXPECT_FALSE(z.overlap_comm);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_TRUE(z.reduce_scatter);
  EXPECT_EQ(z.stage3_prefetch_bucket_size, 50000000);
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
  EXPECT_EQ(yaml_error(head + "    offload_optimizer: {device: cpu}\n"),
            "job.yaml:5:24: strategy.zero_optimization.offload_optimizer: DeepSpeed's "
            "offload_optimizer is not implemented by runner-host's zero strategy (runner-host "
            "never ignores a key: remove it)");
  EXPECT_THAT(yaml_error(head + "    offload_param: {device: nvme}\n"),
              HasSubstr("strategy.zero_optimization.offload_param: DeepSpeed's offload_param is "
                        "not implemented"));
  EXPECT_THAT(yaml_error(head + "  fp16: {enabled: true, auto_cast: true}\n"),
              HasSubstr("strategy.fp16.auto_cast: DeepSpeed's auto_cast (set "
                        "strategy.inputs_to_half: true) is not implemented"));
  // In the file the error points at the key.
  EXPECT_EQ(json_error("{\"zero_optimization\": {\"stage\": 3,\n"
                       "  \"zero_quantized_weights\": true}}"),
            "ds.json:2:3: zero_optimization.zero_quantized_weights: DeepSpeed's "
            "zero_quantized_weights (ZeRO++) is not implemented by runner-host's zero strategy "
            "(runner-host never ignores a key: remove it)");
  EXPECT_THAT(json_error(R"({"zero_optimization": {"stage": 3}, "bf16": {"enabled": true,
                             "immediate_grad_update": true}})"),
              HasSubstr("bf16.immediate_grad_update: DeepSpeed's immediate_grad_update is not"));
  EXPECT_THAT(json_error(R"({"zero_optimization": {"stage": 3}, "wall_clock_breakdown": true})"),
              HasSubstr("ds.json:1:37: wall_clock_breakdown: DeepSpeed's wall_clock_breakdown is "
                        "not implemented"));
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
            "runner-host: set data.train.batch_size (the batch of one rank) in the job instead");
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
            "key in runner-host: set optim_wrapper.accumulative_counts in the job instead");
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
  EXPECT_THAT(yaml_error("strategy:\n  type: zero\n  zero_optimization: {stage: 2, "
                         "reduce_bucket_size: auto}\n"),
              HasSubstr("strategy.zero_optimization.reduce_bucket_size: expected a number, got "
                        "'auto' ('auto' is a placeholder"));
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

}  // namespace
}  // namespace rh::zero
