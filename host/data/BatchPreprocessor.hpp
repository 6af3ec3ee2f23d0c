// MMPretrain's ClsDataPreprocessor, done on the batch where the model runs:
// 8-bit images become float32, channels reversed when `to_rgb` (the
// pipeline keeps BGR), then (x - mean) / std per channel; in training, the
// batch augments (model.train_cfg.augments: Mixup, CutMix, chosen per batch)
// mix the images and turn the labels into soft scores (B, C).
//
// The keys, as MMPretrain writes them: `data_preprocessor: {mean, std,
// to_rgb, num_classes}` at the top of the job or in `model:`, and
// `model.train_cfg: {augments: [{type: Mixup, alpha}, {type: CutMix, alpha,
// cutmix_minmax, correct_lam}], probs}`.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace rh::config {
class Node;
}

namespace rh::data {

struct Batch;

struct BatchAugment {
  enum class Kind { Mixup, CutMix };
  Kind kind = Kind::Mixup;
  double alpha = 1;
  std::optional<std::pair<double, double>> cutmix_minmax;  // CutMix: box sides as fractions
  bool correct_lam = true;  // CutMix: lambda from the clipped box's area
};

class BatchPreprocessor {
 public:
  // Without the keys: 8-bit images become float32 as they are (0..255,
  // ClsDataPreprocessor's defaults), other inputs pass. Throws ConfigError
  // for both places given, or a num_classes that is not the model's.
  static std::unique_ptr<BatchPreprocessor> from_job(const config::Node& job, int64_t num_classes,
                                                     uint64_t seed, int rank);

  // The model's input: uint8 images normalised as above, on `device`; any
  // other input only moved there.
  at::Tensor input(const at::Tensor& batch_input, c10::Device device) const;

  // Training: input() and, with augments, the mixed images and soft scores
  // (B, C) float. The batch's draws (which augment, lambda, the partner
  // permutation, the box) come from (seed, iteration, rank), so a resume
  // repeats them.
  std::pair<at::Tensor, at::Tensor> train(const Batch& batch, c10::Device device,
                                          int64_t iteration) const;

  bool has_augments() const { return !augments_.empty(); }

 private:
  at::Tensor normalize_on_cpu(const at::Tensor& batch_input) const;

  bool normalize_ = false;
  // normalize_on_cpu()'s last output, reused once it is free.
  mutable std::mutex reuse_mutex_;
  mutable at::Tensor reuse_;
  std::array<double, 3> mean_{0, 0, 0}, std_{1, 1, 1};
  bool to_rgb_ = false;
  std::vector<BatchAugment> augments_;
  std::vector<double> probs_;  // one per augment and the rest for none; empty: uniform
  int64_t num_classes_ = 0;
  uint64_t seed_ = 0;
  int rank_ = 0;
};

}  // namespace rh::data
