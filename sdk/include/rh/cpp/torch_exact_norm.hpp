// rh/cpp/torch_exact_norm.hpp — the gradient norm of clip_grad, summed exactly, so
// that it has the same bits however the gradients are cut into tensors,
// shards and ranks.
//
// Why: clipping multiplies every gradient by max_norm / (norm + 1e-6). A
// norm summed in floating point depends on the order of its terms: `single`
// (whole tensors), zero (flat chunks across tensors) and fsdp (per-parameter
// blocks) on the same gradients got coefficients a few ulp apart, and Adam
// carried that into parameters that differed by ~1e-7 — by an amount that
// depends on the CPU's vector width (AVX2 or AVX-512) and on LibTorch's
// kernels. Summed exactly, the norm depends only on the multiset of gradient
// elements: every strategy clips by the same bits, and "zero and fsdp equal
// ddp", "one rank equals single" hold bit for bit.
//
// How: a float32 x is m * 2^(e - 150) with m an integer below 2^24 (e = 1..254;
// subnormals too, with e = 1). So x^2 = m^2 * 2^(2e - 300), m^2 < 2^48, and
// |x| = m * 2^(e - 150): per exponent e, integer sums of m^2 (split in two
// 24-bit halves so that 2^39 elements fit an int64) or of m. Integer sums do
// not depend on order, on threads or on atomics. The whole sum is then an
// integer B times 2^-300 (p = 2) or 2^-150 (p = 1), which `parts()` cuts
// into kParts numbers below 2^40: each is exact in a double, and so is the
// sum of each over up to 2^13 ranks, so a strategy's ReduceGradNorm (a
// double SUM over the ranks) sums them exactly too. `total()` rounds the
// reduced B to a double once (its top 64 bits, then to nearest): the same
// bits for the same B.
//
// Not exact, and said so: float64 gradients (their squares do not fit this
// scheme; summed in double, kept apart in the last part) and norm types
// other than 1, 2 and inf (the caller's own arithmetic). inf needs none of
// this: a max is exact. bfloat16 and float16 elements are cast to float32
// first, which is exact.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>

namespace rh {

// GCC's and Clang's 128-bit integer (__extension__: no -Wpedantic warning).
__extension__ typedef unsigned __int128 U128;

class ExactNormSum {
 public:
  // 16 parts of 40 bits hold B: p = 2 needs 2*254 + 48 bits, plus 40 bits
  // of headroom for the count of elements (sums of up to 2^39 elements per
  // exponent, int64). One more part carries the inexact float64 share.
  static constexpr int kBits = 40;
  static constexpr int kExactParts = 16;
  static constexpr int kParts = kExactParts + 1;
  using Parts = std::array<double, kParts>;

  // power: 2 (sum of squares, the L2 norm) or 1 (sum of |x|, the L1 norm).
  explicit ExactNormSum(int power) : power_(power) {
    if (power != 1 && power != 2) throw std::invalid_argument("ExactNormSum: power must be 1 or 2");
  }

  // Adds every element of `g` (any device; float32, bfloat16, float16 exact,
  // float64 inexact).
  void add(const at::Tensor& g) {
    if (!g.defined() || g.numel() == 0) return;
    if (g.scalar_type() == at::kDouble) {
      at::Tensor a = g.abs();
      inexact_ += (power_ == 2 ? a.mul(a).sum() : a.sum()).item<double>();
      return;
    }
    at::Tensor f = g.scalar_type() == at::kFloat ? g : g.to(at::kFloat);
    f = f.contiguous().view({-1});
    if (f.is_cpu())
      add_cpu(f.data_ptr<float>(), f.numel());
    else
      add_tensor_ops(f);
  }

  // The sum as kParts doubles: parts[0..kExactParts) integers below 2^40
  // (B's 40-bit digits, lowest first), parts[kExactParts] the float64
  // share. A non-finite element makes parts[0] +inf or NaN, which any sum
  // over ranks keeps.
  Parts parts() const {
    Big b{};
    for (int e = 0; e < 256; ++e) {
      const int shift = power_ == 2 ? 2 * e : e;
      add_shifted(b, static_cast<U128>(hi_[e]) << 24, shift);
      add_shifted(b, static_cast<U128>(lo_[e]), shift);
    }
    Parts out{};
    for (int j = 0; j < kExactParts; ++j) out[j] = static_cast<double>(digit(b, j));
    out[kExactParts] = inexact_;
    if (nan_)
      out[0] = std::numeric_limits<double>::quiet_NaN();
    else if (inf_)
      out[0] = std::numeric_limits<double>::infinity();
    return out;
  }

  // Sum of |x|^power of the parts (summed over ranks or not), as a double.
  static double total(const Parts& parts, int power) {
    for (double p : parts)
      if (!std::isfinite(p)) return p;
    Big b{};
    for (int j = 0; j < kExactParts; ++j) {
      const double v = parts[j];
      if (v < 0 || v != std::floor(v) || v >= 9007199254740992.0)  // 2^53
        throw std::invalid_argument("ExactNormSum::total: part " + std::to_string(j) +
                                    " is not an integer below 2^53");
      add_shifted(b, static_cast<U128>(v), kBits * j);
    }
    return top_bits(b, power == 2 ? -300 : -150) + parts[kExactParts];
  }

  double total() const { return total(parts(), power_); }

 private:
  // B in base 2^64: 16 * 40 = 640 bits, and a limb spare for the carry.
  static constexpr int kLimbs = 11;
  using Big = std::array<std::uint64_t, kLimbs>;

  static void add_shifted(Big& b, U128 v, int shift) {
    int limb = shift / 64;
    const int bit = shift % 64;
    // v << bit spans at most three limbs (v < 2^128).
    std::uint64_t words[3] = {
        static_cast<std::uint64_t>(v << bit),
        static_cast<std::uint64_t>(bit == 0 ? v >> 64 : (v >> (64 - bit)) & ~std::uint64_t{0}),
        static_cast<std::uint64_t>(bit == 0 ? 0 : v >> (128 - bit))};
    U128 carry = 0;
    for (int i = 0; limb < kLimbs && (i < 3 || carry != 0); ++i, ++limb) {
      const U128 s = static_cast<U128>(b[limb]) + (i < 3 ? words[i] : 0) + carry;
      b[limb] = static_cast<std::uint64_t>(s);
      carry = s >> 64;
    }
  }

  // B's 40-bit digit j.
  static std::uint64_t digit(const Big& b, int j) {
    const int shift = kBits * j, limb = shift / 64, bit = shift % 64;
    U128 w = b[limb];
    if (limb + 1 < kLimbs) w |= static_cast<U128>(b[limb + 1]) << 64;
    return static_cast<std::uint64_t>(w >> bit) & ((std::uint64_t{1} << kBits) - 1);
  }

  // B * 2^exponent as a double: B's top 64 bits, rounded to nearest once.
  static double top_bits(const Big& b, int exponent) {
    int limb = kLimbs - 1;
    while (limb >= 0 && b[limb] == 0) --limb;
    if (limb < 0) return 0.0;
    const int lead = 63 - __builtin_clzll(b[limb]);                        // bit of the limb
    const int top = limb * 64 + lead;                                      // B's highest set bit
    const int low = top - 63;                                              // lowest of the 64 kept
    if (low <= 0) return std::ldexp(static_cast<double>(b[0]), exponent);  // B < 2^64
    const int l = low / 64, s = low % 64;
    U128 w = b[l];
    if (l + 1 < kLimbs) w |= static_cast<U128>(b[l + 1]) << 64;
    return std::ldexp(static_cast<double>(static_cast<std::uint64_t>(w >> s)), low + exponent);
  }

  struct Sums {
    std::array<std::int64_t, 256> hi{}, lo{};
    bool inf = false, nan = false;
  };

  static void add_bits(Sums& s, const float* x, std::int64_t n, int power) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint32_t u;
      std::memcpy(&u, x + i, sizeof u);
      std::uint32_t e = (u >> 23) & 0xFFu;
      std::uint64_t m = u & 0x7FFFFFu;
      if (e == 0xFFu) {  // inf or nan
        (m != 0 ? s.nan : s.inf) = true;
        continue;
      }
      if (e == 0)
        e = 1;  // subnormal: m * 2^(1 - 150)
      else
        m |= 0x800000u;
      if (power == 2) {
        const std::uint64_t sq = m * m;
        s.hi[e] += static_cast<std::int64_t>(sq >> 24);
        s.lo[e] += static_cast<std::int64_t>(sq & 0xFFFFFFu);
      } else {
        s.lo[e] += static_cast<std::int64_t>(m);
      }
    }
  }

  void merge(const Sums& s) {
    for (int e = 0; e < 256; ++e) {
      hi_[e] += s.hi[e];
      lo_[e] += s.lo[e];
    }
    inf_ = inf_ || s.inf;
    nan_ = nan_ || s.nan;
  }

  // Threads may split the elements anyhow: integer sums merge in any order.
  void add_cpu(const float* x, std::int64_t n) {
    std::mutex mutex;
    at::parallel_for(0, n, 1 << 16, [&](std::int64_t begin, std::int64_t end) {
      Sums s;
      add_bits(s, x + begin, end - begin, power_);
      std::lock_guard<std::mutex> lock(mutex);
      merge(s);
    });
  }

  // Any other device: the same integers with tensor ops (an int64
  // index_add_ is exact in any order), in chunks that bound the temporaries.
  // `f`: float32, contiguous, one dimension. Public so that the tests check
  // this (the CUDA) path against the CPU loop on the CPU.
 public:
  void add_tensor_ops(const at::Tensor& f) {
    constexpr std::int64_t kChunk = std::int64_t{1} << 22;
    const auto longs = at::TensorOptions().dtype(at::kLong).device(f.device());
    at::Tensor hi = at::zeros({256}, longs), lo = at::zeros({256}, longs);
    for (std::int64_t at0 = 0; at0 < f.numel(); at0 += kChunk) {
      const at::Tensor x = f.narrow(0, at0, std::min(kChunk, f.numel() - at0));
      const at::Tensor bits =
          x.view(at::kInt).to(at::kLong).bitwise_and(static_cast<std::int64_t>(0xFFFFFFFF));
      at::Tensor e = at::bitwise_right_shift(bits, 23).bitwise_and(0xFF);
      at::Tensor m = bits.bitwise_and(0x7FFFFF);
      const at::Tensor normal = e.gt(0);
      m = at::where(normal, m.bitwise_or(0x800000), m);
      e = e.clamp_min(1);
      const at::Tensor special = e.eq(0xFF);  // inf or nan
      if (special.any().item<bool>()) {
        nan_ = nan_ || x.isnan().any().item<bool>();
        inf_ = inf_ || x.isinf().any().item<bool>();
        m = m.masked_fill(special, 0);
        e = e.masked_fill(special, 1);
      }
      if (power_ == 2) {
        const at::Tensor sq = m.mul(m);
        hi.index_add_(0, e, at::bitwise_right_shift(sq, 24));
        lo.index_add_(0, e, sq.bitwise_and(0xFFFFFF));
      } else {
        lo.index_add_(0, e, m);
      }
    }
    const at::Tensor h = hi.cpu(), l = lo.cpu();
    for (int e = 0; e < 256; ++e) {
      hi_[e] += h[e].item<std::int64_t>();
      lo_[e] += l[e].item<std::int64_t>();
    }
  }

 private:
  int power_;
  std::array<std::int64_t, 256> hi_{}, lo_{};
  double inexact_ = 0;
  bool inf_ = false, nan_ = false;
};

}  // namespace rh
