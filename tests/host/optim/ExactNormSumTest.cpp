// ExactNormSum (rh/cpp/torch_exact_norm.hpp): the clip norm's sum, exact, so that
// it has the same bits however the gradients are cut into tensors, shards
// and ranks — the root of "one rank of any strategy clips as single" and
// "zero and fsdp equal ddp" bit for bit.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>

#include "rh/cpp/torch_exact_norm.hpp"

namespace {

using rh::ExactNormSum;

// Values over the whole float32 range: normal ones from 2^-120 to 2^100,
// subnormals, zeros and both signs; the same seed every run.
at::Tensor wide_values(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-120, 100);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = static_cast<float>(std::ldexp(mant(rng), expo(rng)));
    if (i % 97 == 0) x = std::ldexp(1.0f, -149) * static_cast<float>(1 + i % 1000);  // subnormal
    if (i % 89 == 0) x = 0.0f;
    v[static_cast<size_t>(i)] = (i % 2) ? -x : x;
  }
  return torch::tensor(v);
}

// The sum over `pieces` of one tensor, each piece a rank: parts summed in
// double across the "ranks", as a strategy's ReduceGradNorm does.
double sum_over_ranks(const std::vector<at::Tensor>& pieces, int power) {
  ExactNormSum::Parts total{};
  for (const at::Tensor& piece : pieces) {
    ExactNormSum s(power);
    s.add(piece);
    const ExactNormSum::Parts parts = s.parts();
    for (int j = 0; j < ExactNormSum::kParts; ++j) total[j] += parts[j];
  }
  return ExactNormSum::total(total, power);
}

TEST(ExactNormSumTest, TheSameBitsHoweverTheElementsAreCutOrdered) {
  const at::Tensor x = wide_values(200003, 1);
  for (int power : {1, 2}) {
    SCOPED_TRACE(power);
    ExactNormSum whole(power);
    whole.add(x);
    const double expected = whole.total();
    // Cut at random places, shuffled, as tensors of one rank...
    std::mt19937 rng(7);
    std::vector<int64_t> cuts{0, x.numel()};
    for (int i = 0; i < 9; ++i)
      cuts.push_back(std::uniform_int_distribution<int64_t>(0, x.numel())(rng));
    std::sort(cuts.begin(), cuts.end());
    std::vector<at::Tensor> pieces;
    for (size_t i = 0; i + 1 < cuts.size(); ++i)
      pieces.push_back(x.narrow(0, cuts[i], cuts[i + 1] - cuts[i]));
    std::shuffle(pieces.begin(), pieces.end(), rng);
    ExactNormSum one_rank(power);
    for (const at::Tensor& p : pieces) one_rank.add(p.reshape({-1, 1}).t());  // any shape
    EXPECT_EQ(one_rank.total(), expected);
    // ... and each piece on a rank of its own.
    EXPECT_EQ(sum_over_ranks(pieces, power), expected);
    // The reverse order.
    at::Tensor reversed = x.flip({0});
    ExactNormSum again(power);
    again.add(reversed);
    EXPECT_EQ(again.total(), expected);
  }
}

// The result is the exact sum rounded once: its top 64 bits, then to a
// double, a relative error below 2^-63 + 2^-53. The reference sums the
// squares in long double (64-bit mantissa: every square of a float32 is
// exact there, each of the n - 1 additions errs by at most 2^-64 of the
// running sum), so |ref - exact| <= (n - 1) 2^-64 ref: the two differ by at
// most (2^-53 + 2^-63 + n 2^-64) of the value.
TEST(ExactNormSumTest, EqualsALongDoubleSumWithinTheRoundingOfBoth) {
  const at::Tensor x = wide_values(50000, 2);
  const float* p = x.data_ptr<float>();
  for (int power : {1, 2}) {
    long double ref = 0;
    for (int64_t i = 0; i < x.numel(); ++i)
      ref += power == 2 ? static_cast<long double>(p[i]) * p[i]
                        : std::fabs(static_cast<long double>(p[i]));
    ExactNormSum s(power);
    s.add(x);
    const long double bound =
        (std::ldexp(1.0L, -53) + std::ldexp(1.0L, -63) + x.numel() * std::ldexp(1.0L, -64)) * ref;
    EXPECT_LE(std::fabs(static_cast<long double>(s.total()) - ref), bound) << power;
  }
}

TEST(ExactNormSumTest, SmallCasesAreExact) {
  ExactNormSum s(2);
  s.add(torch::tensor({3.0f, -4.0f}));
  EXPECT_EQ(s.total(), 25.0);
  ExactNormSum tiny(2);  // the smallest subnormal: 2^-149, squared 2^-298
  tiny.add(torch::tensor({std::ldexp(1.0f, -149)}));
  EXPECT_EQ(tiny.total(), std::ldexp(1.0, -298));
  ExactNormSum big(2);  // FLT_MAX^2 and 2^-149: the whole range in one sum
  big.add(torch::tensor({FLT_MAX, std::ldexp(1.0f, -149)}));
  EXPECT_EQ(big.total(), static_cast<double>(FLT_MAX) * FLT_MAX);
  ExactNormSum l1(1);
  l1.add(torch::tensor({0.5f, -0.25f, 1e-40f}));
  EXPECT_EQ(l1.total(), 0.75 + static_cast<double>(1e-40f));
  ExactNormSum none(2);
  EXPECT_EQ(none.total(), 0.0);
}

TEST(ExactNormSumTest, NonFiniteElementsMakeTheSumNonFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  ExactNormSum a(2);
  a.add(torch::tensor({1.0f, inf}));
  EXPECT_EQ(a.total(), std::numeric_limits<double>::infinity());
  ExactNormSum b(2);
  b.add(torch::tensor({1.0f, std::nanf(""), inf}));
  EXPECT_TRUE(std::isnan(b.total()));
  // Carried through a sum over ranks.
  ExactNormSum::Parts parts = a.parts();
  ExactNormSum c(2);
  c.add(torch::tensor({2.0f}));
  const ExactNormSum::Parts other = c.parts();
  for (int j = 0; j < ExactNormSum::kParts; ++j) parts[j] += other[j];
  EXPECT_EQ(ExactNormSum::total(parts, 2), std::numeric_limits<double>::infinity());
}

// The path other devices take (tensor ops, int64 index_add_), run on the
// CPU: the same integers as the CPU loop.
TEST(ExactNormSumTest, TheTensorOpsPathEqualsTheLoop) {
  const at::Tensor x = wide_values(100001, 3);
  for (int power : {1, 2}) {
    ExactNormSum loop(power), ops(power);
    loop.add(x);
    ops.add_tensor_ops(x);
    EXPECT_EQ(ops.parts(), loop.parts()) << power;
  }
  ExactNormSum special(2);
  special.add_tensor_ops(torch::tensor({1.0f, std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(special.total(), std::numeric_limits<double>::infinity());
}

// bfloat16 and float16 are cast to float32 (exact); float64 is summed in
// double, apart (not exact, and said so in the header).
TEST(ExactNormSumTest, NarrowDtypesAreExactAndFloat64IsSummedApart) {
  const at::Tensor x = torch::randn({4097});
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    const at::Tensor narrow = x.to(dtype);
    ExactNormSum a(2), b(2);
    a.add(narrow);
    b.add(narrow.to(at::kFloat));
    EXPECT_EQ(a.total(), b.total());
  }
  const at::Tensor d = x.to(at::kDouble);
  ExactNormSum s(2);
  s.add(d);
  const ExactNormSum::Parts parts = s.parts();
  for (int j = 0; j < ExactNormSum::kExactParts; ++j) EXPECT_EQ(parts[j], 0.0);
  EXPECT_EQ(parts[ExactNormSum::kExactParts], d.mul(d).sum().item<double>());
}

}  // namespace
