#include "job/JobSettings.hpp"

namespace rh::config {
namespace {

// The node at a dotted path below `root`, or nullptr when a part is absent
// or null.
const config::Node* key(const config::Node& root, const std::string& path) {
  return root.find_path(path, true);
}

int64_t int_or(const config::Node& root, const std::string& path, int64_t dflt) {
  const config::Node* n = key(root, path);
  return n != nullptr ? n->as_int() : dflt;
}

bool bool_or(const config::Node& root, const std::string& path, bool dflt) {
  const config::Node* n = key(root, path);
  return n != nullptr ? n->as_bool() : dflt;
}

}  // namespace

RunMode run_mode(const std::string& name) {
  if (name == "val") return RunMode::Val;
  if (name == "test") return RunMode::Test;
  return RunMode::Train;
}

JobSettings read_settings(const config::Node& root) {
  JobSettings s;
  TrainCfg& t = s.train;
  t.present = key(root, "train_cfg") != nullptr;
  t.max_epochs = int_or(root, "train_cfg.max_epochs", 0);
  t.max_iters = int_or(root, "train_cfg.max_iters", 0);
  t.by_epoch = bool_or(root, "train_cfg.by_epoch", t.max_epochs > 0);
  t.val_interval = int_or(root, "train_cfg.val_interval", t.by_epoch ? 1 : 1000);
  t.val_begin = int_or(root, "train_cfg.val_begin", 1);

  DistCfg& d = s.dist;
  if (const config::Node* n = key(root, "dist.backend")) d.backend = n->as_string();
  if (const config::Node* n = key(root, "dist.timeout_s")) d.timeout_s = n->as_double();
  d.shared_memory = bool_or(root, "dist.shared_memory", true);
  d.keep_global_batch_at = root.location();
  if (const config::Node* n = key(root, "dist.keep_global_batch")) {
    // true, false (YAML's spellings), accumulate or batch_size (the schema).
    const std::string v = n->as_string();
    d.keep_global_batch = v == "batch_size"              ? KeepGlobalBatch::BatchSize
                          : v == "false" || v == "False" ? KeepGlobalBatch::No
                                                         : KeepGlobalBatch::Accumulate;
    d.keep_global_batch_at = n->location();
  }
  if (const config::Node* n = key(root, "dist.master_addr")) {
    d.master_addr = n->as_string();
    d.master_addr_at = n->location();
  }
  if (const config::Node* n = key(root, "dist.master_port")) {
    d.master_port = static_cast<int>(n->as_int());
    d.master_port_at = n->location();
  }

  OptimCfg& o = s.optim;
  if (const config::Node* n = key(root, "optim_wrapper.type")) o.wrapper_type = n->as_string();
  if (const config::Node* n = key(root, "optim_wrapper.optimizer.type"))
    o.optimizer_type = n->as_string();
  if (const config::Node* n = key(root, "optim_wrapper.optimizer.momentum"))
    o.momentum = n->as_double();
  o.amsgrad = bool_or(root, "optim_wrapper.optimizer.amsgrad", false);
  o.accumulative_counts =
      static_cast<int32_t>(int_or(root, "optim_wrapper.accumulative_counts", 1));
  if (const config::Node* n = key(root, "optim_wrapper.constructor"))
    o.constructor = n->as_string();
  s.sizes.num_classes = int_or(root, "model.num_classes", 0);
  s.sizes.train_batch_size = int_or(root, "data.train.batch_size", 1);
  s.sizes.train_block_size = int_or(root, "data.train.dataset.block_size", 0);

  s.seed.seed = static_cast<uint64_t>(int_or(root, "seed", 0));
  s.seed.diff_rank_seed = bool_or(root, "diff_rank_seed", false);
  s.seed.deterministic = bool_or(root, "deterministic", false);
  s.auto_scale_lr.enable = bool_or(root, "auto_scale_lr.enable", false);
  s.auto_scale_lr.base_batch_size = int_or(root, "auto_scale_lr.base_batch_size", 0);
  if (const config::Node* n = key(root, "resume_dtype"))
    s.resume_dtype = n->as_string() == "convert" ? ResumeDtype::Convert : ResumeDtype::Exact;
  return s;
}

std::vector<config::ConfigError> check_run(const config::Node& root, RunMode mode) {
  std::vector<config::ConfigError> errors;
  const JobSettings s = read_settings(root);
  if (mode != RunMode::Train) {
    // val / test without training: the split's loader is what runs.
    const char* split = mode == RunMode::Val ? "val" : "test";
    if (key(root, std::string("data.") + split) == nullptr)
      errors.emplace_back(root.location(), "data",
                          std::string("--mode ") + split + " needs data." + split);
    return errors;
  }
  const config::Node* cfg = key(root, "train_cfg");
  if (cfg == nullptr) {
    errors.emplace_back(root.location(), "",
                        "train mode needs train_cfg (max_epochs or max_iters); --mode val or "
                        "--mode test evaluate without it");
  } else if (s.train.by_epoch && s.train.max_epochs <= 0) {
    errors.emplace_back(cfg->location(), cfg->path(), "by_epoch training needs max_epochs");
  } else if (!s.train.by_epoch && s.train.max_iters <= 0) {
    errors.emplace_back(cfg->location(), cfg->path(), "iteration-based training needs max_iters");
  }
  if (s.auto_scale_lr.enable && s.auto_scale_lr.base_batch_size <= 0) {
    const config::Node* a = key(root, "auto_scale_lr");
    errors.emplace_back(a->location(), a->path(), "enable: true needs base_batch_size");
  }
  return errors;
}

}  // namespace rh::config
