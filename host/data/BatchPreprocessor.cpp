#include "data/BatchPreprocessor.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <mutex>
#include <numeric>
#include <string>

#include "config/ConfigNode.hpp"
#include "data/DataLoader.hpp"
#include "data/image/SampleRng.hpp"

namespace rh::data {
namespace {

using config::ConfigError;
using config::Node;

// The stream of SampleRng keys for batch augments (0 is the samples').
constexpr uint64_t kAugmentStream = 1;

std::array<double, 3> three(const Node& n) {
  if (!n.is_sequence() || n.seq_items().size() != 3)
    throw ConfigError(n.location(), n.path(), "expected 3 numbers, one per channel");
  return {n.seq_items()[0]->as_double(), n.seq_items()[1]->as_double(),
          n.seq_items()[2]->as_double()};
}

// A permutation of 0..n-1 (Fisher-Yates on the batch's generator).
at::Tensor permutation(int64_t n, image::SampleRng& rng) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i)
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(rng.randint(0, i))]);
  return at::tensor(p, at::kLong);
}

}  // namespace

// One pass from bytes to floats: output channel c reads input channel c (or
// 2 - c with to_rgb) through a 256-entry table of (v - mean) / std, the
// same float32 arithmetic as the tensor ops below (one subtraction, one
// division, each rounded once).
at::Tensor BatchPreprocessor::normalize_on_cpu(const at::Tensor& batch_input) const {
  const at::Tensor in = batch_input.contiguous();
  const int64_t b = in.size(0), plane = in.size(2) * in.size(3);
  // The last batch's tensor when nothing else holds it any more (the step
  // that used it is over): a batch of float images is tens of megabytes,
  // whose fresh pages would each be faulted in and zeroed.
  at::Tensor out;
  {
    std::lock_guard<std::mutex> lock(reuse_mutex_);
    // use_count: no other tensor; the storage's: no view of it either.
    if (reuse_.defined() && reuse_.use_count() == 1 && reuse_.storage().use_count() == 1 &&
        reuse_.sizes() == in.sizes())
      out = reuse_;
    else
      out = reuse_ = at::empty(in.sizes(), in.options().dtype(at::kFloat));
  }
  float table[3][256];
  for (int c = 0; c < 3; ++c)
    for (int v = 0; v < 256; ++v)
      table[c][v] = normalize_ ? (static_cast<float>(v) - static_cast<float>(mean_[c])) /
                                     static_cast<float>(std_[c])
                               : static_cast<float>(v);
  const uint8_t* src = in.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  at::parallel_for(0, b * 3, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bc = begin; bc < end; ++bc) {
      const int c = static_cast<int>(bc % 3);
      const uint8_t* s = src + (bc - c + (to_rgb_ ? 2 - c : c)) * plane;
      const float* t = table[c];
      float* d = dst + bc * plane;
      for (int64_t i = 0; i < plane; ++i) d[i] = t[s[i]];
    }
  });
  return out;
}

std::unique_ptr<BatchPreprocessor> BatchPreprocessor::from_job(const Node& job, int64_t num_classes,
                                                               uint64_t seed, int rank) {
  const Node* top = job.find("data_preprocessor");
  const Node* model = job.find("model");
  const Node* inner = model != nullptr ? model->find("data_preprocessor") : nullptr;
  const Node* train_cfg = model != nullptr ? model->find("train_cfg") : nullptr;
  const Node* augments = train_cfg != nullptr ? train_cfg->find("augments") : nullptr;
  if (top != nullptr && inner != nullptr)
    throw ConfigError(inner->location(), inner->path(),
                      "data_preprocessor is given at the top of the job too (" +
                          top->location().str() + "): give it once");
  const Node* cfg = top != nullptr ? top : inner;

  auto p = std::make_unique<BatchPreprocessor>();
  p->num_classes_ = num_classes;
  p->seed_ = seed;
  p->rank_ = rank;
  if (cfg != nullptr) {
    if (const Node* n = cfg->find("mean")) p->mean_ = three(*n);
    if (const Node* n = cfg->find("std")) p->std_ = three(*n);
    if (const Node* n = cfg->find("to_rgb")) p->to_rgb_ = n->as_bool();
    p->normalize_ = cfg->find("mean") != nullptr || cfg->find("std") != nullptr;
    if (const Node* n = cfg->find("num_classes"); n != nullptr && n->as_int() != num_classes)
      throw ConfigError(n->location(), n->path(),
                        "num_classes " + std::to_string(n->as_int()) + " but the model has " +
                            std::to_string(num_classes));
  }
  if (augments != nullptr) {
    for (const auto& a : augments->seq_items()) {
      BatchAugment aug;
      aug.kind = a->find("type")->as_string() == "CutMix" ? BatchAugment::Kind::CutMix
                                                          : BatchAugment::Kind::Mixup;
      aug.alpha = a->find("alpha")->as_double();
      if (const Node* mm = a->find("cutmix_minmax"); mm != nullptr && !mm->is_null()) {
        if (mm->seq_items().size() != 2)
          throw ConfigError(mm->location(), mm->path(), "expected [min, max]");
        aug.cutmix_minmax =
            std::make_pair(mm->seq_items()[0]->as_double(), mm->seq_items()[1]->as_double());
      }
      if (const Node* c = a->find("correct_lam")) aug.correct_lam = c->as_bool();
      p->augments_.push_back(aug);
    }
    if (const Node* probs = train_cfg->find("probs")) {
      double total = 0;
      if (probs->is_sequence()) {
        for (const auto& v : probs->seq_items()) p->probs_.push_back(v->as_double());
      } else {
        p->probs_.push_back(probs->as_double());
      }
      for (double v : p->probs_) total += v;
      if (p->probs_.size() != p->augments_.size() || total > 1 + 1e-9)
        throw ConfigError(probs->location(), probs->path(),
                          "one probability per augment (" + std::to_string(p->augments_.size()) +
                              "), adding up to at most 1");
      p->probs_.push_back(1 - total);  // no augment
    }
  }
  return p;
}

at::Tensor BatchPreprocessor::input(const at::Tensor& batch_input, c10::Device device) const {
  if (batch_input.scalar_type() == at::kByte && device.is_cpu() && batch_input.dim() == 4 &&
      batch_input.size(1) == 3)
    return normalize_on_cpu(batch_input);
  at::Tensor x = batch_input.to(device, /*non_blocking=*/true);
  if (x.scalar_type() != at::kByte) return x;
  x = x.to(at::kFloat);
  if (to_rgb_ && x.dim() == 4 && x.size(1) == 3) x = x.flip({1});
  if (normalize_) {
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(device);
    const at::Tensor mean = at::tensor({mean_[0], mean_[1], mean_[2]}, opts).view({1, 3, 1, 1});
    const at::Tensor std = at::tensor({std_[0], std_[1], std_[2]}, opts).view({1, 3, 1, 1});
    x = (x - mean) / std;
  }
  return x;
}

std::pair<at::Tensor, at::Tensor> BatchPreprocessor::train(const Batch& batch, c10::Device device,
                                                           int64_t iteration) const {
  at::Tensor x = input(batch.input, device);
  at::Tensor target = batch.target.to(device, /*non_blocking=*/true);
  if (augments_.empty()) return {x, target};
  // One-hot scores, then MMPretrain's RandomBatchAugment: one augment per
  // batch, uniformly or by `probs` (the last share: none).
  at::Tensor score = at::one_hot(target, num_classes_).to(at::kFloat);
  image::SampleRng rng(seed_, iteration, static_cast<uint64_t>(rank_), kAugmentStream);
  size_t pick = 0;
  if (probs_.empty()) {
    pick = static_cast<size_t>(rng.randint(0, static_cast<int64_t>(augments_.size()) - 1));
  } else {
    double u = rng.uniform();
    while (pick + 1 < probs_.size() && u >= probs_[pick]) u -= probs_[pick++];
    if (pick == augments_.size()) return {x, score};
  }
  const BatchAugment& a = augments_[pick];
  double lam = rng.beta(a.alpha, a.alpha);
  const int64_t b = x.size(0);
  const at::Tensor index = permutation(b, rng).to(device);
  if (a.kind == BatchAugment::Kind::Mixup) {
    x = lam * x + (1 - lam) * x.index_select(0, index);
  } else {
    // CutMix (MMPretrain's rand_bbox / rand_bbox_minmax): a box of the
    // partner image pasted in; lambda becomes the share left uncovered.
    const int64_t h = x.size(-2), w = x.size(-1);
    int64_t y1, y2, x1, x2;
    if (a.cutmix_minmax) {
      const auto [lo, hi] = *a.cutmix_minmax;
      const int64_t ch =
          rng.randint(static_cast<int64_t>(h * lo), static_cast<int64_t>(h * hi) - 1);
      const int64_t cw =
          rng.randint(static_cast<int64_t>(w * lo), static_cast<int64_t>(w * hi) - 1);
      y1 = rng.randint(0, h - ch - 1);
      x1 = rng.randint(0, w - cw - 1);
      y2 = y1 + ch;
      x2 = x1 + cw;
    } else {
      const double ratio = std::sqrt(1 - lam);
      const int64_t ch = static_cast<int64_t>(h * ratio), cw = static_cast<int64_t>(w * ratio);
      const int64_t cy = rng.randint(0, h - 1), cx = rng.randint(0, w - 1);
      y1 = std::clamp<int64_t>(cy - ch / 2, 0, h);
      y2 = std::clamp<int64_t>(cy + ch / 2, 0, h);
      x1 = std::clamp<int64_t>(cx - cw / 2, 0, w);
      x2 = std::clamp<int64_t>(cx + cw / 2, 0, w);
    }
    if (a.correct_lam || a.cutmix_minmax)
      lam = 1.0 - static_cast<double>((y2 - y1) * (x2 - x1)) / static_cast<double>(h * w);
    x = x.clone();
    if (y2 > y1 && x2 > x1) {
      at::Tensor box = x.index_select(0, index).slice(-2, y1, y2).slice(-1, x1, x2);
      x.slice(-2, y1, y2).slice(-1, x1, x2).copy_(box);
    }
  }
  score = lam * score + (1 - lam) * score.index_select(0, index);
  return {x, score};
}

}  // namespace rh::data
