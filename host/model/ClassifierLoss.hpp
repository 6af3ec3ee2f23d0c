// The classifier's training loss: MMPretrain's `model.head.loss`.
//
//   {type: CrossEntropyLoss, loss_weight}
//   {type: LabelSmoothLoss, label_smooth_val, mode: original | classy_vision, loss_weight}
//
// Both take hard labels (B) int64 or soft scores (B, C) float (Mixup and
// CutMix make those): the loss is then the soft cross entropy
// -sum_c target_c log softmax(logits)_c, averaged over the batch.
// LabelSmoothLoss smooths the (one-hot or soft) target first:
// target (1 - eps) + eps / C, eps = label_smooth_val (original) or
// label_smooth_val / (1 + label_smooth_val) (classy_vision).
//
// The built-in models have no `head` block of MMPretrain's (their head is
// sized by model.num_classes): `model.head` holds only `loss`.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

namespace rh::config {
class Node;
}

namespace rh::model {

class ClassifierLoss {
 public:
  // Null without model.head.loss (the default: cross entropy on the labels).
  static std::unique_ptr<ClassifierLoss> from_job(const config::Node& job);

  at::Tensor operator()(const at::Tensor& logits, const at::Tensor& target) const;

 private:
  double eps_ = 0;     // label smoothing; 0 for CrossEntropyLoss
  double weight_ = 1;  // loss_weight
};

// Soft or hard cross entropy, mean over the batch (no smoothing, weight 1).
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& target);

}  // namespace rh::model
