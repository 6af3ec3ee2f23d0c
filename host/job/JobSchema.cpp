#include "job/JobSchema.hpp"

#include "config/Suggest.hpp"
#include "data/DataSchema.hpp"
#include "model/ActivationCheckpointConfig.hpp"
#include "model/ClassifierSchema.hpp"
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
      {"data_preprocessor", model::preprocessor_schema(), false,
       "MMPretrain's: mean, std, to_rgb for 8-bit images (or in model:)"},
      {"data", map({{"train", data::loader_schema()},
                    {"val", data::loader_schema()},
                    {"test", data::loader_schema()}})},
      {"activation_checkpoint",
       map({{"mode", enumeration({"none", "full", "selective"}), false,
             "none (default), full (every unit) or selective (every Nth unit)"},
            {"selective_ac_option", string(), false, "selective: N, recompute every Nth unit"}}),
       false,
       "units whose forward keeps no activations and runs again in backward (torchtitan's "
       "keys)"},
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
      {"val_cfg", nullable(map({{"type", string(), false, "ValLoop (MMEngine's; the only loop)"}})),
       false, "the validation loop (validate_job refuses any type but ValLoop)"},
      {"test_cfg",
       nullable(map({{"type", string(), false, "TestLoop (MMEngine's; the only loop)"}})), false,
       "the test loop (validate_job refuses any type but TestLoop)"},
      {"strategy", plugin_spec(false), false, "the training strategy plugin"},
      {"hooks", list(plugin_spec(true)), false, "hook plugins"},
      {"checkpoint_io", plugin_spec(false), false, "the checkpoint storage plugin"},
      {"load_from",
       nullable(one_of({string(), map({{"path", string(), true}, {"strict", boolean()}})},
                       "a checkpoint directory or weights file, or {path, strict}")),
       false, "weights to start from (a checkpoint directory or a .safetensors file)"},
      {"resume", one_of({boolean(), string()}, "true, false, 'auto' or a checkpoint path")},
      {"resume_dtype", enumeration({"exact", "convert"}), false,
       "a resumed tensor saved in a narrower dtype than this run's, with no float32 master: "
       "exact (default) refuses it, convert casts it (logged)"},
      {"dist", map({
                   {"backend", enumeration({"auto", "gloo", "nccl"})},
                   {"timeout_s", number_above(0)},
                   {"master_addr", string(), false,
                    "rank 0's address; --master-addr and MASTER_ADDR win over it"},
                   {"master_port", integer(0, 65535), false,
                    "the rendezvous port (0: a free one, built-in launcher on one node); "
                    "--master-port and MASTER_PORT win over it"},
                   {"shared_memory", boolean()},
                   {"keep_global_batch",
                    one_of({boolean(), enumeration({"accumulate", "batch_size"})},
                           "accumulate, batch_size or false"),
                    false,
                    "after an elastic restart on fewer ranks (--max-restarts): keep the first "
                    "world's global batch by accumulation (default, or true) or by a larger "
                    "per-rank batch, or not (false)"},
               })},
      // MMEngine's env_cfg holds a job's environment settings; runner-host
      // takes only these (its others are refused as unknown keys).
      {"env_cfg",
       map({
           {"blas_coretype", string(), false,
            "OpenBLAS's kernels for this job: auto (a better core than OpenBLAS "
            "picks, when one checks out) or a core name (SkylakeX, Haswell, ...); "
            "set as OPENBLAS_CORETYPE before LibTorch loads, never over the "
            "environment's"},
           {"heap", enumeration({"release", "keep"}), false,
            "what glibc's heap does with a freed tensor of 1 MiB or more: release "
            "(default: returned to the system, resident memory follows the tensors) "
            "or keep (kept for the next one: no page faults, up to a third more "
            "resident memory)"},
       }),
       false, "environment settings (MMEngine's env_cfg): blas_coretype, heap"},
  });
}

}  // namespace

const Schema& job_schema() {
  static const Schema kSchema = build_job_schema();
  return kSchema;
}

}  // namespace rh::config

namespace rh::config {

namespace {

// val_cfg.type / test_cfg.type: MMEngine's loop of that name is what
// runner-host runs (evaluate data.val every train_cfg.val_interval and with
// --mode val; data.test with --mode test); any other loop (MMagic's
// MultiValLoop, a custom one) is not, and is refused rather than run as a
// ValLoop. MMEngine's scoped name (mmengine.ValLoop) is the same loop.
void check_loop_type(const Node& root, const std::string& key, const std::string& loop,
                     const std::string& what, std::vector<ConfigError>& errors) {
  const Node* cfg = root.find(key);
  const Node* type = cfg != nullptr ? cfg->find("type") : nullptr;
  if (type == nullptr || type->is_null()) return;
  const std::string& name = type->as_string();
  if (name == loop || name == "mmengine." + loop) return;
  const std::string close = suggest(name, {loop});
  errors.emplace_back(type->location(), key + ".type",
                      "'" + name + "' is not a loop runner-host runs: it runs MMEngine's " + loop +
                          " (" + what + ") and no other" +
                          (close.empty() ? std::string() : " (did you mean '" + close + "'?)") +
                          "; write type: " + loop + " or leave the key out");
}

// MMEngine refuses val_cfg / test_cfg None beside a val / test dataloader
// ("should be either all None or not None"); runner-host validates when
// data.<split> is there, so `val_cfg: null` beside it would be ignored.
void check_loop_off(const Node& root, const std::string& key, const std::string& split,
                    std::vector<ConfigError>& errors) {
  const Node* cfg = root.find(key);
  const Node* data = root.find("data");
  const Node* loader = data != nullptr ? data->find(split) : nullptr;
  if (cfg == nullptr || !cfg->is_null() || loader == nullptr || loader->is_null()) return;
  errors.emplace_back(cfg->location(), key,
                      key + ": null beside data." + split +
                          ": runner-host runs the loop whenever "
                          "data." +
                          split +
                          " is there (MMEngine refuses the pair: both null or "
                          "neither); remove data." +
                          split + " to go without it, or leave " + key + " out");
}

}  // namespace

std::vector<ConfigError> validate_job(const Node& root) {
  std::vector<ConfigError> errors = validate(root, job_schema());
  if (!errors.empty()) return errors;  // the checks below assume the schema holds
  check_loop_type(root, "val_cfg", "ValLoop",
                  "data.val, evaluated every train_cfg.val_interval and by --mode val", errors);
  check_loop_type(root, "test_cfg", "TestLoop", "data.test, evaluated by --mode test", errors);
  check_loop_off(root, "val_cfg", "val", errors);
  check_loop_off(root, "test_cfg", "test", errors);
  if (const Node* a = root.find("activation_checkpoint"))
    for (auto& e : model::check_activation_checkpoint(*a)) errors.push_back(std::move(e));
  if (const Node* o = root.find("optim_wrapper"))
    for (auto& e : optim::check_optim_wrapper(*o)) errors.push_back(std::move(e));
  if (const Node* p = root.find("param_scheduler"))
    for (auto& e : optim::check_param_scheduler(*p)) errors.push_back(std::move(e));
  return errors;
}

}  // namespace rh::config
