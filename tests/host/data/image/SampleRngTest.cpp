#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "data/image/SampleRng.hpp"

namespace rh::data::image {
namespace {

TEST(SampleRngTest, TheSameKeyGivesTheSameDrawsAndANeighbourOthers) {
  SampleRng a(7, 2, 11), b(7, 2, 11), epoch(7, 3, 11), index(7, 2, 12), stream(7, 2, 11, 1);
  const uint64_t first = a.next();
  EXPECT_EQ(first, b.next());
  EXPECT_NE(first, epoch.next());
  EXPECT_NE(first, index.next());
  EXPECT_NE(first, stream.next());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next(), b.next());
}

// Moments of 200000 draws: a mean's standard error is sigma / sqrt(n), so
// each bound below is 6 standard errors (fails by chance with p < 1e-8).
TEST(SampleRngTest, TheDistributionsHaveTheirMoments) {
  SampleRng rng(1, 0, 0);
  const int n = 200000;
  const double k = 6 / std::sqrt(static_cast<double>(n));
  double u = 0, z = 0, z2 = 0, beta = 0, bern = 0;
  std::vector<int> faces(6, 0);
  for (int i = 0; i < n; ++i) {
    const double x = rng.uniform(2, 4);
    ASSERT_GE(x, 2);
    ASSERT_LT(x, 4);
    u += x;
    const double g = rng.normal(1, 2);
    z += g;
    z2 += (g - 1) * (g - 1);
    const double b = rng.beta(0.8, 0.8);
    ASSERT_GE(b, 0);
    ASSERT_LE(b, 1);
    beta += b;
    bern += rng.bernoulli(0.25) ? 1 : 0;
    const int64_t f = rng.randint(1, 6);
    ASSERT_GE(f, 1);
    ASSERT_LE(f, 6);
    ++faces[static_cast<size_t>(f - 1)];
  }
  EXPECT_NEAR(u / n, 3, k * std::sqrt(1.0 / 3));          // uniform(2, 4): sd 2/sqrt(12)
  EXPECT_NEAR(z / n, 1, k * 2);                           // normal sd 2
  EXPECT_NEAR(z2 / n, 4, k * 4 * std::sqrt(2.0));         // var of (g-1)^2 = 2 sd^4
  EXPECT_NEAR(beta / n, 0.5, k * std::sqrt(0.25 / 2.6));  // Beta(a, a): var 1/(4(2a+1))
  EXPECT_NEAR(bern / n, 0.25, k * std::sqrt(0.25 * 0.75));
  for (int f : faces) EXPECT_NEAR(f / static_cast<double>(n), 1.0 / 6, k * std::sqrt(5.0 / 36));
}

}  // namespace
}  // namespace rh::data::image
