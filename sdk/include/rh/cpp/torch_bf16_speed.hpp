// rh/cpp/torch_bf16_speed.hpp — whether bfloat16 saves time on this CPU. A
// LibTorch that has no fast bfloat16 matrix kernel for the CPU it runs on
// computes a bfloat16 product slower than a float32 one: Debian 13's
// LibTorch 2.6 takes 3.4x as long on a Xeon with AVX-512 BF16, and
// AmpOptimWrapper in bfloat16 ran the gpt step in 3.59 s against 1.33 s in
// float32. Mixed precision on the CPU then saves memory but costs time. The
// host (AmpOptimWrapper) and the strategies with a bfloat16 of their own
// (zero's bf16, fsdp's mixed_precision.param_dtype) measure it when they
// set up on the CPU and, on rank 0, say so: one helper for the three.
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace rh {

// bfloat16 slower than float32 by more than this is worth a warning: a
// factor near 1 is within the noise of two timings on a busy machine (the
// factor below varied by a fifth from run to run here).
inline constexpr double kBf16SlowdownWarning = 1.2;

// How many times as long an (n x n) @ (n x n) matrix product takes in
// bfloat16 as in float32 on the CPU, with LibTorch's threads as they are:
// each dtype once to warm up, then `repetitions` times, the fastest of each
// compared. The fastest, not the median: on a machine shared with other
// work a parallel product waits for its slowest thread, and LibTorch 1.13's
// oneDNN bfloat16 product on 2 threads of 2 busy cores measured 0.05x to
// 7.5x float32's median from run to run, its fastest 0.033-0.049x. n = 256,
// 9 repetitions: 20-55 ms in all here.
inline double bf16_matmul_slowdown(int64_t n = 256, int repetitions = 9) {
  // Inputs from linspace, not the random generator: measuring must not move
  // the training's random stream.
  const at::Tensor a = at::linspace(-1, 1, n * n, at::kFloat).reshape({n, n});
  const at::Tensor b = a.t().contiguous();
  auto fastest_ms = [&](const at::Tensor& x, const at::Tensor& y) {
    at::Tensor out = at::mm(x, y);  // warm-up: kernels chosen, buffers allocated
    double best = 0;
    for (int r = 0; r < std::max(1, repetitions); ++r) {
      const auto start = std::chrono::steady_clock::now();
      at::mm_out(out, x, y);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      best = r == 0 ? ms : std::min(best, ms);
    }
    return best;
  };
  const double fp32 = fastest_ms(a, b);
  const double bf16 = fastest_ms(a.to(at::kBFloat16), b.to(at::kBFloat16));
  return fp32 > 0 ? bf16 / fp32 : 0;
}

// What the measurement says, for the log of the one who trains in bfloat16.
struct Bf16Speed {
  double factor = 0;    // bf16_matmul_slowdown()
  bool slower = false;  // factor > kBf16SlowdownWarning: a warning
  // The warning when slower, else a line for the debug log:
  // "<what>: bfloat16 matrix products on this CPU take 3.4x as long as
  // float32 (LibTorch 2.6.0, measured now): bfloat16 saves memory here but
  // not time; float32 trains faster".
  std::string message;
};

// Measures and words it; `what` names who trains in bfloat16
// ("AmpOptimWrapper (dtype bfloat16)", "strategy 'zero' (bf16.enabled)").
inline Bf16Speed bf16_speed(const std::string& what) {
  Bf16Speed s;
  s.factor = bf16_matmul_slowdown();
  s.slower = s.factor > kBf16SlowdownWarning;
  char factor[32];
  std::snprintf(factor, sizeof factor, "%.2gx", s.factor);
  s.message = what + ": bfloat16 matrix products on this CPU take " + factor +
              " as long as float32 (LibTorch " + TORCH_VERSION + ", measured now)";
  if (s.slower) s.message += ": bfloat16 saves memory here but not time; float32 trains faster";
  return s;
}

}  // namespace rh
