#include "data/image/SampleRng.hpp"

#include <cmath>

namespace rh::data::image {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

SampleRng::SampleRng(uint64_t seed, int64_t epoch, uint64_t index, uint64_t stream) {
  // Each input passes through splitmix64 before the next is mixed in, so
  // neighbouring (epoch, index) pairs give unrelated states.
  uint64_t x = seed;
  uint64_t h = splitmix64(x);
  x = h ^ static_cast<uint64_t>(epoch);
  h = splitmix64(x);
  x = h ^ index;
  h = splitmix64(x);
  x = h ^ stream;
  for (uint64_t& s : s_) s = splitmix64(x);
}

uint64_t SampleRng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SampleRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double SampleRng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

int64_t SampleRng::randint(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(next());  // the whole 64-bit range
  // Rejection keeps every value equally likely.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % span;
  uint64_t r = next();
  while (r >= limit) r = next();
  return lo + static_cast<int64_t>(r % span);
}

bool SampleRng::bernoulli(double p) { return uniform() < p; }

double SampleRng::normal(double mean, double std) {
  double u1 = uniform();
  while (u1 <= 0) u1 = uniform();
  const double u2 = uniform();
  return mean + std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

double SampleRng::gamma(double shape) {
  if (shape < 1) {
    // Gamma(a) = Gamma(a + 1) * U^(1/a).
    double u = uniform();
    while (u <= 0) u = uniform();
    return gamma(shape + 1) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = normal(0, 1);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v;
    if (u > 0 && std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
  }
}

double SampleRng::beta(double a, double b) {
  const double x = gamma(a);
  const double y = gamma(b);
  return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace rh::data::image
