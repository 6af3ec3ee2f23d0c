// The random numbers of one sample's transforms (or one batch's Mixup).
//
// Every random choice of the data pipeline draws from a generator seeded by
// (seed, epoch, index, stream), never from a thread's or worker's state: a
// sample is transformed the same way whichever worker, rank or resume point
// loads it. The draws are written out (no std:: distributions, whose output
// differs between standard libraries), so a run is the same on any build.
#pragma once

#include <cstdint>

namespace rh::data::image {

class SampleRng {
 public:
  // `stream` separates users of one (seed, epoch, index): 0 the sample's
  // transforms, others e.g. a batch's augments.
  SampleRng(uint64_t seed, int64_t epoch, uint64_t index, uint64_t stream = 0);

  uint64_t next();                          // 64 random bits (xoshiro256**)
  double uniform();                         // [0, 1), 53 bits
  double uniform(double lo, double hi);     // [lo, hi)
  int64_t randint(int64_t lo, int64_t hi);  // lo..hi, both included (hi >= lo)
  bool bernoulli(double p);                 // true with probability p
  double normal(double mean, double std);   // Box-Muller
  double beta(double a, double b);          // Beta(a, b), a, b > 0 (Mixup's lambda)

 private:
  double gamma(double shape);  // Marsaglia-Tsang
  uint64_t s_[4];
};

}  // namespace rh::data::image
