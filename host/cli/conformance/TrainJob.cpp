#include "cli/conformance/TrainJob.hpp"

#include <sstream>

namespace rh::cli::conformance {

std::string TrainJob::yaml() const {
  std::ostringstream y;
  y << "seed: 11\n"
    << "model: " << model << "\n"
    << "data:\n"
    << "  train: {dataset: ";
  if (dataset.empty())
    y << "{type: synthetic_classification, num_samples: " << samples
      << ", num_features: 16, num_classes: 4}";
  else
    y << dataset;
  y << ",\n"
    << "          batch_size: " << batch << ", shuffle: true, num_workers: 0}\n"
    << "optim_wrapper:\n"
    << "  optimizer: " << optimizer << "\n"
    << "  accumulative_counts: " << accumulation << "\n";
  if (clip_grad > 0) y << "  clip_grad: {max_norm: " << clip_grad << "}\n";
  y << "train_cfg: {by_epoch: false, max_iters: " << max_iters << "}\n"
    << "strategy: " << strategy << "\n"
    << "hooks:\n"
    << "  - {type: checkpoint, by_epoch: false, interval: " << save_interval << "}\n"
    << extra_hooks
    // A rank that dies must not leave the others waiting for long.
    << "dist: {timeout_s: 30}\n"
    << extra;
  return y.str();
}

}  // namespace rh::cli::conformance
