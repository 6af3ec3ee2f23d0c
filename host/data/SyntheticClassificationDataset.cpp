#include "data/SyntheticClassificationDataset.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rh::data {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// SplitMix64: a small generator whose output is the same on every platform
// (unlike std::normal_distribution), seeded per example.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1].
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }
  // Standard normal (Box-Muller; one of the pair is dropped, for simplicity).
  double normal() {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    return r * std::cos(kTwoPi * uniform());
  }

 private:
  uint64_t state_;
};

uint64_t mix(uint64_t a, uint64_t b) { return SplitMix64(a ^ SplitMix64(b).next()).next(); }

constexpr uint64_t kStructureStream = 0x5354525543545552ULL;  // the class directions

}  // namespace

SyntheticClassificationDataset::SyntheticClassificationDataset(
    SyntheticClassificationOptions options)
    : options_(options) {
  const int64_t F = options_.num_features;
  const int64_t C = options_.num_classes;
  if (F < 1 || C < 2 || !(options_.noise >= 0)) {
    throw std::invalid_argument("synthetic_classification: need num_features >= 1, " +
                                std::string("num_classes >= 2 and noise >= 0"));
  }

  // Class directions: Gaussian rows, Gram-Schmidt-orthonormalised while C <= F.
  SplitMix64 rng(mix(options_.seed, kStructureStream));
  directions_.assign(static_cast<size_t>(C * F), 0.0);
  for (int64_t k = 0; k < C; ++k) {
    double* u = &directions_[static_cast<size_t>(k * F)];
    for (int64_t j = 0; j < F; ++j) u[j] = rng.normal();
    for (int64_t prev = 0; prev < k && C <= F; ++prev) {
      const double* v = &directions_[static_cast<size_t>(prev * F)];
      double dot = 0;
      for (int64_t j = 0; j < F; ++j) dot += u[j] * v[j];
      for (int64_t j = 0; j < F; ++j) u[j] -= dot * v[j];
    }
    double norm = 0;
    for (int64_t j = 0; j < F; ++j) norm += u[j] * u[j];
    norm = std::sqrt(norm);
    for (int64_t j = 0; j < F; ++j) u[j] /= norm;
  }

  const size_t n = options_.num_samples;
  const auto f = static_cast<size_t>(F);
  if (n > 0 && n <= kMaxCacheBytes / (f * sizeof(float) + sizeof(int64_t))) {
    // new T[n] without (): pages are only touched as slots fill.
    slot_state_.reset(new std::atomic<uint8_t>[n]);
    for (size_t i = 0; i < n; ++i) slot_state_[i].store(kEmpty, std::memory_order_relaxed);
    cached_features_.reset(new float[n * f]);
    cached_labels_.reset(new int64_t[n]);
  }
}

Example SyntheticClassificationDataset::get(size_t index) const {
  if (index >= size()) {
    throw std::out_of_range("synthetic_classification: index " + std::to_string(index) +
                            " >= size " + std::to_string(size()));
  }
  const int64_t F = options_.num_features;
  at::Tensor input = at::empty({F}, at::kFloat);
  float* x = input.data_ptr<float>();
  if (slot_state_ == nullptr) return Example{input, at::scalar_tensor(draw(index, x), at::kLong)};

  const size_t bytes = static_cast<size_t>(F) * sizeof(float);
  float* slot = &cached_features_[index * static_cast<size_t>(F)];
  std::atomic<uint8_t>& state = slot_state_[index];
  if (state.load(std::memory_order_acquire) == kReady) {
    std::memcpy(x, slot, bytes);
    return Example{input, at::scalar_tensor(cached_labels_[index], at::kLong)};
  }
  const int64_t label = draw(index, x);
  uint8_t expected = kEmpty;
  if (state.compare_exchange_strong(expected, kFilling, std::memory_order_acquire)) {
    std::memcpy(slot, x, bytes);
    cached_labels_[index] = label;
    state.store(kReady, std::memory_order_release);
  }
  return Example{input, at::scalar_tensor(label, at::kLong)};
}

int64_t SyntheticClassificationDataset::draw(size_t index, float* x) const {
  drawn_.fetch_add(1, std::memory_order_relaxed);
  const int64_t F = options_.num_features;
  const int64_t C = options_.num_classes;
  const uint64_t stream = mix(options_.seed, static_cast<uint64_t>(options_.split) + 1);
  SplitMix64 rng(mix(stream, index));

  std::vector<double> z(static_cast<size_t>(F));
  for (double& v : z) v = rng.normal();

  // The class: the direction with the largest |u_k · z|.
  int64_t label = 0;
  double best = -1, best_dot = 0;
  for (int64_t k = 0; k < C; ++k) {
    const double* u = &directions_[static_cast<size_t>(k * F)];
    double dot = 0;
    for (int64_t j = 0; j < F; ++j) dot += u[j] * z[static_cast<size_t>(j)];
    if (std::abs(dot) > best) {
      best = std::abs(dot);
      best_dot = dot;
      label = k;
    }
  }

  const double* u = &directions_[static_cast<size_t>(label * F)];
  const double push = best_dot >= 0 ? kMargin : -kMargin;
  for (int64_t j = 0; j < F; ++j) {
    x[j] =
        static_cast<float>(z[static_cast<size_t>(j)] + push * u[j] + options_.noise * rng.normal());
  }
  return label;
}

}  // namespace rh::data
