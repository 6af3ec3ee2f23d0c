// The host's own job keys, read once into typed structs: train_cfg, dist,
// the seeds, auto_scale_lr, resume_dtype. The schema (job/JobSchema.cpp)
// checks each key's type and range; check_run() adds the rules between keys
// and the run's mode, so that the program, before it launches a rank, and
// each rank's step 0 (and --dry-run) refuse the same jobs with exit 2. No
// LibTorch: main.cpp's launcher uses it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::config {

// --mode: what the run does with the job.
enum class RunMode { Train, Val, Test };

// --mode's value ("train", "val", "test"); the command line checked it.
RunMode run_mode(const std::string& name);

// train_cfg, with MMEngine's defaults: by_epoch when max_epochs is set,
// val_interval 1 epoch or 1000 iterations.
struct TrainCfg {
  bool present = false;  // the job has train_cfg (train mode needs it)
  bool by_epoch = true;
  int64_t max_epochs = 0;
  int64_t max_iters = 0;
  int64_t val_interval = 1;
  int64_t val_begin = 1;
};

// dist.keep_global_batch: after an elastic restart on fewer ranks, the first
// world's global batch kept by accumulation (default, or true), by a larger
// per-rank batch, or not (false).
enum class KeepGlobalBatch { Accumulate, BatchSize, No };

struct DistCfg {
  std::string backend = "auto";  // auto | gloo | nccl
  double timeout_s = 300.0;
  bool shared_memory = true;
  KeepGlobalBatch keep_global_batch = KeepGlobalBatch::Accumulate;
  config::Location keep_global_batch_at;  // where the key is (the job's start when absent)
  // Rank 0's address and port as the job writes them (the environment and
  // the launcher's flags win over them), with where they are written.
  std::optional<std::string> master_addr;
  config::Location master_addr_at;
  std::optional<int> master_port;
  config::Location master_port_at;
};

struct SeedCfg {
  uint64_t seed = 0;
  bool diff_rank_seed = false;  // offset the seed by the rank
  bool deterministic = false;   // LibTorch's deterministic algorithms
};

struct AutoScaleLr {
  bool enable = false;
  int64_t base_batch_size = 0;  // > 0 when enable (check_run)
};

// resume_dtype: a resumed tensor saved narrower than this run's, with no
// float32 master: refused (exact) or cast (convert).
enum class ResumeDtype { Exact, Convert };

// What the host reads of optim_wrapper beside the optimizer, which reads its
// own keys (optim/OptimWrapper): the memory estimate's count of optimizer
// state, layer-wise lr decay, accumulation.
struct OptimCfg {
  std::string wrapper_type = "OptimWrapper";  // or AmpOptimWrapper
  std::string optimizer_type = "SGD";
  double momentum = 0;  // SGD keeps a momentum buffer when it is not 0
  bool amsgrad = false;
  int32_t accumulative_counts = 1;
  std::string constructor;  // "" or LearningRateDecayOptimWrapperConstructor
};

// Sizes the host reads beside their owners: model.num_classes (the batch
// augments' one-hot labels), data.train.batch_size and its dataset's
// block_size (the memory estimate).
struct SizesCfg {
  int64_t num_classes = 0;  // 0: the model has no such key
  int64_t train_batch_size = 1;
  int64_t train_block_size = 0;  // 0: not a token dataset
};

struct JobSettings {
  TrainCfg train;
  OptimCfg optim;
  SizesCfg sizes;
  DistCfg dist;
  SeedCfg seed;
  AutoScaleLr auto_scale_lr;
  ResumeDtype resume_dtype = ResumeDtype::Exact;
};

// Reads a job the schema has validated (config::validate_job): the keys the
// job leaves out take the defaults above.
JobSettings read_settings(const config::Node& root);

// The rules between keys and the run's mode, every error in file order:
// train mode needs train_cfg with max_epochs (by_epoch) or max_iters,
// val/test modes need data.val/data.test, auto_scale_lr.enable needs
// base_batch_size. For a job validate_job passed.
std::vector<config::ConfigError> check_run(const config::Node& root, RunMode mode);

}  // namespace rh::config
