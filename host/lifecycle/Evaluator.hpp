// Losses and evaluation metrics: cross-entropy for both tasks; top-1/top-5
// accuracy (in %) for classification, perplexity for language models.
#pragma once

#include <ATen/core/Tensor.h>

#include "lifecycle/HookDispatcher.hpp"
#include "model/Model.hpp"

namespace rh::lifecycle {

class Evaluator {
 public:
  Evaluator(model::Task task, int64_t num_classes);
  // Mean cross-entropy: logits (B, C) vs target (B), or (B, T, V) vs (B, T).
  static at::Tensor loss(model::Task task, const at::Tensor& logits, const at::Tensor& target);
  void add(const at::Tensor& logits, const at::Tensor& target);
  // "loss", "accuracy/top1", "accuracy/top5" (when C > 5) | "loss", "perplexity".
  Metrics metrics() const;

 private:
  model::Task task_;
  int64_t num_classes_;
  double loss_sum_ = 0;  // summed over samples (tokens)
  int64_t count_ = 0;
  int64_t top1_ = 0;
  int64_t top5_ = 0;
};

}  // namespace rh::lifecycle
