#include "config/JobSchema.hpp"

#include "data/DataSchema.hpp"
#include "model/ModelSchema.hpp"
#include "optim/OptimSchema.hpp"

namespace rh::config {
namespace {

Schema build_job_schema() {
  using namespace schema;

  return map({
      {"work_dir", string(), false, "directory for logs and checkpoints"},
      {"seed", integer(0), false, "global random seed"},
      {"diff_rank_seed", boolean(), false, "offset the seed by the rank"},
      {"deterministic", boolean(), false, "use deterministic algorithms"},
      {"log_level", enumeration({"trace", "debug", "info", "warn", "error"})},
      {"model", model::model_schema(), true, "the model: type and its keys"},
      {"data", map({{"train", data::loader_schema()},
                    {"val", data::loader_schema()},
                    {"test", data::loader_schema()}})},
      {"optim_wrapper", optim::optim_wrapper_schema()},
      {"param_scheduler", optim::param_scheduler_schema()},
      {"auto_scale_lr", map({{"enable", boolean()}, {"base_batch_size", integer(1)}})},
      {"train_cfg", map({
                        {"by_epoch", boolean()},
                        {"max_epochs", integer(1)},
                        {"max_iters", integer(1)},
                        {"val_interval", integer(1)},
                        {"val_begin", integer(1)},
                    })},
      {"val_cfg", nullable(map({{"type", string()}}))},
      {"test_cfg", nullable(map({{"type", string()}}))},
      {"strategy", plugin_spec(false), false, "the training strategy plugin"},
      {"hooks", list(plugin_spec(true)), false, "hook plugins"},
      {"checkpoint_io", plugin_spec(false), false, "the checkpoint storage plugin"},
      {"load_from",
       nullable(one_of({string(), map({{"path", string(), true}, {"strict", boolean()}})},
                       "a checkpoint directory or weights file, or {path, strict}")),
       false, "weights to start from (a checkpoint directory or a .safetensors file)"},
      {"resume", one_of({boolean(), string()}, "true, false, 'auto' or a checkpoint path")},
      {"dist", map({
                   {"backend", enumeration({"auto", "gloo", "nccl"})},
                   {"timeout_s", number_above(0)},
                   {"master_addr", string()},
                   {"master_port", integer(0, 65535)},
                   {"shared_memory", boolean()},
               })},
  });
}

}  // namespace

const Schema& job_schema() {
  static const Schema kSchema = build_job_schema();
  return kSchema;
}

}  // namespace rh::config

namespace rh::config {

std::vector<ConfigError> validate_job(const Node& root) {
  std::vector<ConfigError> errors = validate(root, job_schema());
  if (!errors.empty()) return errors;  // the checks below assume the schema holds
  if (const Node* o = root.find("optim_wrapper"))
    for (auto& e : optim::check_optim_wrapper(*o)) errors.push_back(std::move(e));
  if (const Node* p = root.find("param_scheduler"))
    for (auto& e : optim::check_param_scheduler(*p)) errors.push_back(std::move(e));
  return errors;
}

}  // namespace rh::config
