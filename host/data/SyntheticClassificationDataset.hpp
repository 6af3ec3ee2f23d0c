// `type: synthetic_classification` — a classification task that a linear
// classifier cannot solve and a small MLP learns in seconds, generated from
// a seed (no files).
//
// Each class k owns a direction u_k of feature space (orthonormal when
// num_classes <= num_features, random unit vectors otherwise; fixed by `seed`).
// An example draws z ~ N(0, I_F); its class is the direction with the largest
// |u_k · z|; z is pushed a margin further along ±u_y so the classes do not
// touch; the input is z plus `noise` · N(0, I_F), which blurs the boundaries
// again. The class depends on |u_k · z|, an even function, so every class has
// mean zero: linear classifiers stay near chance while 2·C ReLUs suffice.
// On the quickstart's data (F = 32, C = 10, 8192 train, noise 0.1) logistic
// regression reaches ~12% val accuracy, an MLP [128, 128] ~97% in 10 epochs
// (tests/host/data/SyntheticClassificationDatasetTest.cpp measures both).
//
// Example i of a split is drawn from its own stream (seed, split, i): lazily,
// deterministically, and different for train, val and test.
//
// Drawing an example costs 2·F Box-Muller normals in double (a log and a cos
// each: ~14k instructions for F = 32), which on the quickstart was ~13% of
// the CPU on the loader thread, every epoch again. The first get(i) keeps the
// example's float features and label, and later epochs copy them: the data
// is exactly what the draw gives (the cache holds its result, nothing is
// approximated). The cache costs 4·F + 8 bytes per example and is only kept
// while that totals at most kMaxCacheBytes; a larger dataset draws every
// get() again, as before.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/Dataset.hpp"

namespace rh::data {

struct SyntheticClassificationOptions {
  enum class Split { Train, Val, Test };

  size_t num_samples = 0;
  int64_t num_features = 0;  // F
  int64_t num_classes = 0;   // C >= 2
  uint64_t seed = 0;
  Split split = Split::Train;
  double noise = 0.1;  // std of the Gaussian noise added to every feature
};

class SyntheticClassificationDataset : public Dataset {
 public:
  // How far an example is pushed along ±u_y (in units of the unit-variance
  // features): its |u_y · z| then leads the other classes' by at least this.
  static constexpr double kMargin = 0.25;
  // The largest cache of drawn examples kept (features and labels).
  static constexpr size_t kMaxCacheBytes = size_t{512} << 20;

  explicit SyntheticClassificationDataset(SyntheticClassificationOptions options);

  size_t size() const override { return options_.num_samples; }
  Example get(size_t index) const override;  // input (F) float32, target () int64
  model::Task task() const override { return model::Task::Classification; }
  int64_t num_classes() const override { return options_.num_classes; }

  // How many examples were drawn (not served from the cache) so far.
  size_t examples_drawn() const { return drawn_.load(std::memory_order_relaxed); }
  bool caches_examples() const { return slot_state_ != nullptr; }

 private:
  // Draws example `index` into x (F floats); returns its label.
  int64_t draw(size_t index, float* x) const;

  SyntheticClassificationOptions options_;
  std::vector<double> directions_;  // (C, F) row-major, unit rows

  // The cache (null when over kMaxCacheBytes). Slot i: kEmpty, then
  // kFilling while the one thread that claimed it writes it, then kReady
  // (published with release; readers acquire). A reader that finds a slot
  // being filled draws the example itself rather than waiting.
  enum SlotState : uint8_t { kEmpty = 0, kFilling = 1, kReady = 2 };
  std::unique_ptr<std::atomic<uint8_t>[]> slot_state_;
  std::unique_ptr<float[]> cached_features_;  // (N, F), left uninitialised until filled
  std::unique_ptr<int64_t[]> cached_labels_;  // (N)
  mutable std::atomic<size_t> drawn_{0};
};

}  // namespace rh::data
