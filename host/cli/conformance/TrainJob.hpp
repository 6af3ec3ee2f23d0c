// The tiny training job the equivalence, exact_resume, checkpoints and
// faults checks run, as YAML: an mlp on synthetic classification data,
// by iteration, with a checkpoint hook. Fields are named so that each check
// states what it changes.
#pragma once

#include <string>

namespace rh::cli::conformance {

struct TrainJob {
  std::string strategy = "{type: ddp}";  // a YAML flow map
  // layers.0 frozen: a strategy must leave it alone and keep it out of the
  // optimizer (requires_grad false), as the shipped strategies do.
  std::string model =
      "{type: mlp, in_features: 16, hidden: [32, 32], num_classes: 4, frozen: [layers.0]}";
  int samples = 512;  // synthetic_classification samples (the whole job's)
  // The train dataset as a flow map; empty: synthetic_classification.
  std::string dataset;
  int batch = 4;  // per rank
  std::string optimizer = "{type: AdamW, lr: 0.01, weight_decay: 0.01}";
  double clip_grad = 0.5;   // optim_wrapper.clip_grad.max_norm; 0: none
  int accumulation = 2;     // optim_wrapper.accumulative_counts
  int max_iters = 6;        // train_cfg.max_iters (by iteration)
  int save_interval = 6;    // checkpoint hook interval (save_last is on)
  std::string extra;        // more top-level lines (resume:, diff_rank_seed:)
  std::string extra_hooks;  // more hook list items, each "  - {...}\n"

  std::string yaml() const;
};

}  // namespace rh::cli::conformance
