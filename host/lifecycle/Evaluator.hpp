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
  // The running totals (loss sum, count, top-1 hits, top-5 hits), so ranks
  // can sum them into exact global metrics.
  std::vector<double> totals() const;
  void set_totals(const std::vector<double>& totals);

 private:
  model::Task task_;
  int64_t num_classes_;
  double loss_sum_ = 0;  // summed over samples (tokens)
  double count_ = 0;
  double top1_ = 0;
  double top5_ = 0;
};

}  // namespace rh::lifecycle
