#include "lifecycle/Evaluator.hpp"

#include <torch/torch.h>

#include <cmath>

namespace rh::lifecycle {

Evaluator::Evaluator(model::Task task, int64_t num_classes)
    : task_(task), num_classes_(num_classes) {}

at::Tensor Evaluator::loss(model::Task task, const at::Tensor& logits, const at::Tensor& target) {
  namespace F = torch::nn::functional;
  if (task == model::Task::LanguageModel)
    return F::cross_entropy(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
  return F::cross_entropy(logits, target);
}

void Evaluator::add(const at::Tensor& logits, const at::Tensor& target) {
  namespace F = torch::nn::functional;
  at::Tensor flat_logits = logits.reshape({-1, logits.size(-1)});  // (N, C)
  at::Tensor flat_target = target.reshape({-1});                   // (N)
  const int64_t n = flat_target.size(0);
  loss_sum_ += F::cross_entropy(flat_logits, flat_target,
                                F::CrossEntropyFuncOptions().reduction(torch::kSum))
                   .item<double>();
  count_ += static_cast<double>(n);
  if (task_ == model::Task::Classification) {
    const int64_t k = std::min<int64_t>(5, flat_logits.size(1));
    at::Tensor topk = std::get<1>(flat_logits.topk(k, 1));  // (N, k)
    at::Tensor hit = topk.eq(flat_target.unsqueeze(1));
    top1_ += static_cast<double>(hit.select(1, 0).sum().item<int64_t>());
    top5_ += static_cast<double>(hit.any(1).sum().item<int64_t>());
  }
}

Metrics Evaluator::metrics() const {
  const double n = std::max(count_, 1.0);
  const double mean_loss = loss_sum_ / n;
  if (task_ == model::Task::LanguageModel)
    return {{"loss", mean_loss}, {"perplexity", std::exp(mean_loss)}};
  Metrics m{{"loss", mean_loss}, {"accuracy/top1", 100.0 * top1_ / n}};
  if (num_classes_ > 5) m.push_back({"accuracy/top5", 100.0 * top5_ / n});
  return m;
}

}  // namespace rh::lifecycle

namespace rh::lifecycle {

std::vector<double> Evaluator::totals() const { return {loss_sum_, count_, top1_, top5_}; }

void Evaluator::set_totals(const std::vector<double>& t) {
  loss_sum_ = t.at(0);
  count_ = t.at(1);
  top1_ = t.at(2);
  top5_ = t.at(3);
}

}  // namespace rh::lifecycle
