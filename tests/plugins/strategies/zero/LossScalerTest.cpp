// LossScaler against DeepSpeed's rules (deepspeed/runtime/fp16/loss_scaler.py,
// DynamicLossScaler.update_scale). Every expected sequence below is worked
// out by hand from those lines; each test names the lines it pins.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "LossScaler.hpp"

namespace rh::zero {
namespace {

using ::testing::HasSubstr;

constexpr bool O = true;   // an overflowing step
constexpr bool C = false;  // a clean step

// The scale after each step of `steps` (steps numbered from 1).
std::vector<double> run(LossScaler& scaler, const std::vector<bool>& steps) {
  std::vector<double> scales;
  int64_t step = 0;
  for (bool overflow : steps) {
    scaler.update(overflow, ++step);
    scales.push_back(scaler.scale());
  }
  return scales;
}

LossScalerOptions options(int power, int64_t window, int hysteresis, bool consecutive = false,
                          double min_scale = 1) {
  LossScalerOptions o;
  o.initial_scale_power = power;
  o.loss_scale_window = window;
  o.hysteresis = hysteresis;
  o.consecutive_hysteresis = consecutive;
  o.min_loss_scale = min_scale;
  return o;
}

// Pins: CreateLossScaler -> DynamicLossScaler(init_scale=2**initial_scale_power)
// (runtime/config.py get_dynamic_loss_scale_args: INITIAL_LOSS_SCALE: 2**init_scale),
// and the documented defaults (precision_config.py: initial_scale_power 16,
// loss_scale_window 1000, hysteresis 2, min_loss_scale 1, loss_scale 0).
TEST(LossScalerTest, InitialScaleIsTwoToTheInitialScalePower) {
  LossScalerOptions defaults;
  EXPECT_EQ(defaults.initial_scale_power, 16);
  EXPECT_EQ(defaults.loss_scale_window, 1000);
  EXPECT_EQ(defaults.hysteresis, 2);
  EXPECT_EQ(defaults.min_loss_scale, 1);
  EXPECT_EQ(defaults.loss_scale, 0);
  EXPECT_FALSE(defaults.consecutive_hysteresis);
  LossScaler scaler(defaults);
  EXPECT_TRUE(scaler.dynamic());
  EXPECT_EQ(scaler.scale(), 65536);
  EXPECT_EQ(LossScaler(options(0, 1000, 2)).scale(), 1);
  EXPECT_EQ(LossScaler(options(3, 1000, 2)).scale(), 8);
  // __init__: cur_iter = 0, last_overflow_iter = -1, cur_hysteresis = delayed_shift.
  EXPECT_EQ(scaler.state(), (LossScalerState{65536, 0, -1, 2}));
}

// Pins: `if self.delayed_shift == 1 or self.cur_hysteresis == 1:`
//         `next_scale = max(self.cur_scale / self.scale_factor, self.min_scale)`
//       `self.last_overflow_iter = self.cur_iter`, `self.cur_iter += 1`.
TEST(LossScalerTest, OverflowWithHysteresisUsedUpHalvesTheScale) {
  LossScaler scaler(options(16, 1000, 1));
  EXPECT_EQ(run(scaler, {O, O, O}), (std::vector<double>{32768, 16384, 8192}));
  EXPECT_EQ(scaler.state(), (LossScalerState{8192, 3, 2, 1}));
}

// Pins: `else: self.cur_hysteresis -= 1` (the scale stays) until
// cur_hysteresis == 1; halving does not refill it.
TEST(LossScalerTest, OverflowWithHysteresisLeftOnlyDecrementsIt) {
  LossScaler scaler(options(16, 1000, 3));
  // h 3 -> 2, 2 -> 1, then halves at h == 1 and stays at 1.
  EXPECT_EQ(run(scaler, {O, O, O, O}), (std::vector<double>{65536, 65536, 32768, 16384}));
  EXPECT_EQ(scaler.state().cur_hysteresis, 1);
  // Clean steps (inside the window) do not refill it either: the next
  // overflow halves at once.
  EXPECT_EQ(run(scaler, {C, C, O}), (std::vector<double>{16384, 16384, 8192}));
}

// Pins: `if self.consecutive_hysteresis: self.cur_hysteresis = self.delayed_shift`
// on every clean step. Alternating overflows never halve with it, and halve
// on the second overflow without it.
TEST(LossScalerTest, ConsecutiveHysteresisRefillsOnEveryCleanStep) {
  LossScaler with(options(16, 1000, 2, /*consecutive=*/true));
  EXPECT_EQ(run(with, {O, C, O, C, O, C, O}), std::vector<double>(7, 65536));
  EXPECT_EQ(with.state().cur_hysteresis, 1);  // the last step overflowed
  with.update(C, 8);
  EXPECT_EQ(with.state().cur_hysteresis, 2);

  LossScaler without(options(16, 1000, 2));
  EXPECT_EQ(run(without, {O, C, O, C, O}),
            (std::vector<double>{65536, 65536, 32768, 32768, 16384}));
  // Two overflows in a row: consecutive_hysteresis makes no difference there.
  LossScaler in_a_row(options(16, 1000, 2, true));
  EXPECT_EQ(run(in_a_row, {O, O}), (std::vector<double>{65536, 32768}));
}

// Pins: `if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:`
//         `self.cur_scale *= self.scale_factor` — with last_overflow_iter
// starting at -1 the first raise comes on the window-th step; after an
// overflow at iteration k, on iteration k + window (window clean steps), and
// every window after a raise.
TEST(LossScalerTest, ScaleDoublesAfterLossScaleWindowCleanSteps) {
  LossScaler scaler(options(4, 3, 1));  // 16, window 3, no hysteresis
  // iters 0 1 2: (2 - -1) % 3 == 0 -> 32; iters 3 4 5 -> 64.
  EXPECT_EQ(run(scaler, {C, C, C, C, C, C}), (std::vector<double>{16, 16, 32, 32, 32, 64}));
  // iter 6 overflows (-> 32, last_overflow_iter 6); iters 7 8 clean; iter 9:
  // (9 - 6) % 3 == 0 -> 64.
  EXPECT_EQ(run(scaler, {O, C, C, C}), (std::vector<double>{32, 32, 32, 64}));
  EXPECT_EQ(scaler.state(), (LossScalerState{64, 10, 6, 1}));

  LossScaler window1(options(0, 1, 1));  // every clean step doubles
  EXPECT_EQ(run(window1, {C, C, O, C}), (std::vector<double>{2, 4, 2, 4}));
}

// Pins: `if not self.consecutive_hysteresis: self.cur_hysteresis = self.delayed_shift`
// inside the raise: the hysteresis is refilled where the scale doubles.
TEST(LossScalerTest, RaiseRefillsTheHysteresis) {
  LossScaler scaler(options(16, 2, 2));
  // iter 0 O: h 2 -> 1; iter 1 C: (1-0)%2 != 0; iter 2 C: (2-0)%2 == 0 ->
  // 131072 and h = 2; iter 3 O: h 2 -> 1, no halving (without the refill it
  // would halve); iter 4 O: halves.
  EXPECT_EQ(run(scaler, {O, C, C, O, O}),
            (std::vector<double>{65536, 65536, 131072, 131072, 65536}));
}

// Pins: `if (self.cur_scale == self.min_scale) and self.raise_error_at_min_scale:
//          raise Exception("Current loss scale already at minimum ...")`
// (raise_error_at_min_scale defaults to True), checked only once the
// hysteresis is used up, and max(scale / 2, min_scale) before that.
TEST(LossScalerTest, ScaleStopsAtMinLossScaleThenAnOverflowThereIsAnError) {
  LossScaler scaler(options(2, 1000, 1, false, /*min_scale=*/3));  // 4, min 3
  EXPECT_EQ(run(scaler, {O}), (std::vector<double>{3}));           // max(2, 3): clamped, no error
  const LossScalerState before = scaler.state();
  try {
    scaler.update(O, 12);
    FAIL() << "no error at the minimum";
  } catch (const LossScaleAtMinimumError& e) {
    EXPECT_THAT(e.what(), HasSubstr("at step 12"));
    EXPECT_THAT(e.what(), HasSubstr("fp16.min_loss_scale (3)"));
    EXPECT_THAT(e.what(), HasSubstr("bf16"));
  }
  EXPECT_EQ(scaler.state(), before);

  // At the minimum, hysteresis left is spent first (no error), then the error.
  LossScaler at_min(options(0, 1000, 2));  // 1 == min 1
  at_min.update(O, 1);
  EXPECT_EQ(at_min.scale(), 1);
  EXPECT_EQ(at_min.state().cur_hysteresis, 1);
  EXPECT_THROW(at_min.update(O, 2), LossScaleAtMinimumError);

  // Default minimum 1 reached by halving 2 -> 1, then the error.
  LossScaler from_two(options(1, 1000, 1));
  from_two.update(O, 1);
  EXPECT_EQ(from_two.scale(), 1);
  EXPECT_THROW(from_two.update(O, 2), LossScaleAtMinimumError);
}

// Pins: class LossScaler (static): update_scale(self, overflow): pass.
TEST(LossScalerTest, StaticScaleNeverChanges) {
  LossScalerOptions o;
  o.loss_scale = 128;
  LossScaler scaler(o);
  EXPECT_FALSE(scaler.dynamic());
  EXPECT_EQ(run(scaler, {O, O, O, C, C, C, O, C}), std::vector<double>(8, 128));
  // No error at any scale: a static scale has no minimum rule.
  o.loss_scale = 1;
  LossScaler one(o);
  EXPECT_NO_THROW(run(one, {O, O, O}));
  EXPECT_EQ(one.scale(), 1);
}

// A deterministic pattern of overflows that exercises every branch.
std::vector<bool> pattern(int n) {
  std::vector<bool> steps;
  for (int i = 0; i < n; ++i) steps.push_back(i % 7 == 3 || i % 11 == 5 || i % 13 == 12);
  return steps;
}

// DeepSpeed saves the scaler object whole; the fields that decide are
// cur_scale, cur_iter, last_overflow_iter and cur_hysteresis. A scaler
// restored from them takes the same decisions as the one that went on.
TEST(LossScalerTest, StateRoundTripGivesIdenticalSubsequentDecisions) {
  const LossScalerOptions o = options(10, 4, 3);
  const std::vector<bool> steps = pattern(60);
  const std::vector<bool> head(steps.begin(), steps.begin() + 25);
  const std::vector<bool> tail(steps.begin() + 25, steps.end());

  LossScaler uninterrupted(o);
  run(uninterrupted, head);
  const LossScalerState saved = uninterrupted.state();
  const std::vector<double> expected = run(uninterrupted, tail);

  LossScaler resumed(o);
  resumed.load_state(saved);
  EXPECT_EQ(resumed.state(), saved);
  EXPECT_EQ(run(resumed, tail), expected);
  EXPECT_EQ(resumed.state(), uninterrupted.state());

  // Without the state the decisions differ (so the comparison above can fail).
  LossScaler fresh(o);
  EXPECT_NE(run(fresh, tail), expected);

  // Each field matters: restoring the scale alone is not enough.
  LossScaler scale_only(o);
  LossScalerState partial = LossScaler(o).state();
  partial.scale = saved.scale;
  scale_only.load_state(partial);
  EXPECT_NE(run(scale_only, tail), expected);
}

TEST(LossScalerTest, LoadStateRejectsAStateTheseOptionsCannotProduce) {
  LossScaler scaler(options(10, 4, 3, false, 2));
  EXPECT_THROW(scaler.load_state({1, 5, 2, 1}), std::invalid_argument);    // below min 2
  EXPECT_THROW(scaler.load_state({NAN, 5, 2, 1}), std::invalid_argument);  // not finite
  EXPECT_THROW(scaler.load_state({8, 5, 5, 1}), std::invalid_argument);  // overflow not < cur_iter
  EXPECT_THROW(scaler.load_state({8, 5, -2, 1}), std::invalid_argument);
  EXPECT_THROW(scaler.load_state({8, 5, 2, 0}), std::invalid_argument);  // hysteresis < 1
  EXPECT_THROW(scaler.load_state({8, 5, 2, 4}), std::invalid_argument);  // > hysteresis 3
  EXPECT_THROW(scaler.load_state({8, -1, -1, 1}), std::invalid_argument);
  EXPECT_NO_THROW(scaler.load_state({8, 5, 2, 3}));
  EXPECT_EQ(scaler.scale(), 8);

  // A static scale comes from the job, never from the checkpoint.
  LossScalerOptions s;
  s.loss_scale = 64;
  LossScaler fixed(s);
  fixed.load_state({4096, 9, 3, 1});
  EXPECT_EQ(fixed.scale(), 64);
  EXPECT_EQ(fixed.state().cur_iter, 9);
}

// Ranges DeepSpeed does not check but whose violation breaks its rule.
TEST(LossScalerTest, RejectsOptionsThatBreakTheRule) {
  EXPECT_THROW(LossScaler(options(16, 0, 2)), std::invalid_argument);     // % 0
  EXPECT_THROW(LossScaler(options(16, 1000, 0)), std::invalid_argument);  // never halves
  EXPECT_THROW(LossScaler(options(16, 1000, 2, false, 0)), std::invalid_argument);
  EXPECT_THROW(LossScaler(options(-1, 1000, 2)), std::invalid_argument);
  EXPECT_THROW(LossScaler(options(128, 1000, 2)), std::invalid_argument);
  EXPECT_THROW(LossScaler(options(1, 1000, 2, false, 4)), std::invalid_argument);  // 2 < min 4
  LossScalerOptions negative;
  negative.loss_scale = -1;
  EXPECT_THROW(LossScaler{negative}, std::invalid_argument);
}

}  // namespace
}  // namespace rh::zero
