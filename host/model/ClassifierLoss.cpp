#include "model/ClassifierLoss.hpp"

#include <ATen/ATen.h>

#include "config/ConfigNode.hpp"

namespace rh::model {

std::unique_ptr<ClassifierLoss> ClassifierLoss::from_job(const config::Node& job) {
  const config::Node* model = job.find("model");
  const config::Node* head = model != nullptr ? model->find("head") : nullptr;
  const config::Node* cfg = head != nullptr ? head->find("loss") : nullptr;
  if (cfg == nullptr) return nullptr;
  auto loss = std::make_unique<ClassifierLoss>();
  if (const config::Node* w = cfg->find("loss_weight")) loss->weight_ = w->as_double();
  if (cfg->find("type")->as_string() == "LabelSmoothLoss") {
    const double v = cfg->find("label_smooth_val")->as_double();
    const config::Node* mode = cfg->find("mode");
    const bool classy = mode != nullptr && mode->as_string() == "classy_vision";
    loss->eps_ = classy ? v / (1 + v) : v;
  }
  return loss;
}

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& target) {
  if (target.dim() == 1) return at::cross_entropy_loss(logits, target);
  return -(target * at::log_softmax(logits, 1)).sum(1).mean();
}

at::Tensor ClassifierLoss::operator()(const at::Tensor& logits, const at::Tensor& target) const {
  at::Tensor loss;
  if (eps_ == 0) {
    loss = classification_loss(logits, target);
  } else {
    const int64_t classes = logits.size(1);
    const at::Tensor one_hot_like =
        target.dim() == 1 ? at::one_hot(target, classes).to(logits.scalar_type()) : target;
    loss = classification_loss(logits,
                               one_hot_like * (1 - eps_) + eps_ / static_cast<double>(classes));
  }
  return weight_ == 1 ? loss : loss * weight_;
}

}  // namespace rh::model
