// AmpOptimWrapper's loss scaler: PyTorch's GradScaler rules, each pinned
// with the numbers torch.cuda.amp.GradScaler gives (init 2^16, growth 2 every
// 2000 clean steps, backoff 0.5), the static scale MMEngine makes of
// `loss_scale: <number>`, and the checkpoint state.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "optim/GradScaler.hpp"

namespace rh::optim {
namespace {

TEST(GradScalerTest, StartsAtTwoToTheSixteenAndBacksOffOnEveryOverflow) {
  GradScaler s(GradScalerOptions{});
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(true, 0);
  EXPECT_EQ(s.scale(), 32768.0);
  s.update(true, 1);  // no hysteresis (DeepSpeed's scaler has one; PyTorch's none)
  EXPECT_EQ(s.scale(), 16384.0);
  EXPECT_EQ(s.state().growth_tracker, 0);
}

TEST(GradScalerTest, GrowsAfterGrowthIntervalCleanStepsCountedFromTheLastOverflow) {
  GradScalerOptions o;
  o.growth_interval = 3;
  GradScaler s(o);
  s.update(false, 0);
  s.update(false, 1);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.state().growth_tracker, 2);
  s.update(true, 2);  // the overflow resets the count
  EXPECT_EQ(s.scale(), 32768.0);
  s.update(false, 3);
  s.update(false, 4);
  EXPECT_EQ(s.scale(), 32768.0);
  s.update(false, 5);  // the third clean step since the overflow
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.state().growth_tracker, 0);
}

TEST(GradScalerTest, TheScaleIsAFloat32NumberAndDoesNotGrowPastFloatRange) {
  GradScalerOptions o;
  o.init_scale = 0.1;  // rounded to float, as PyTorch's float32 scale tensor holds it
  o.growth_interval = 1;
  o.growth_factor = 1e30;
  GradScaler s(o);
  EXPECT_EQ(s.scale(), static_cast<double>(0.1f));
  s.update(false, 0);
  EXPECT_EQ(s.scale(), static_cast<double>(static_cast<float>(static_cast<double>(0.1f) * 1e30)));
  const double before = s.scale();
  s.update(false, 1);  // 1e29 * 1e30 is not a float: the growth is not taken
  EXPECT_EQ(s.scale(), before);
  EXPECT_EQ(s.state().growth_tracker, 0);
}

TEST(GradScalerTest, AStaticScaleNeverChangesButIsStillReported) {
  GradScalerOptions o;
  o.init_scale = 512;
  o.dynamic = false;
  GradScaler s(o);
  for (int i = 0; i < 5; ++i) s.update(i % 2 == 0, i);
  EXPECT_EQ(s.scale(), 512.0);
}

TEST(GradScalerTest, AScaleBackedOffToZeroIsAnErrorNamingTheIteration) {
  GradScalerOptions o;
  o.init_scale = 1e-40;  // float rounds it to a denormal; one backoff more is 0
  o.backoff_factor = 1e-10;
  GradScaler s(o);
  try {
    s.update(true, 17);
    FAIL() << "a scale of 0 must stop the run";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("iteration 17"), std::string::npos) << e.what();
  }
}

TEST(GradScalerTest, RefusesOptionsThatCannotWork) {
  auto refused = [](GradScalerOptions o) {
    try {
      GradScaler s(o);
    } catch (const std::invalid_argument&) {
      return true;
    }
    return false;
  };
  GradScalerOptions o;
  o.init_scale = 0;
  EXPECT_TRUE(refused(o));
  o = {};
  o.init_scale = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(refused(o));
  o = {};
  o.growth_factor = 1;
  EXPECT_TRUE(refused(o));
  o = {};
  o.backoff_factor = 1;
  EXPECT_TRUE(refused(o));
  o = {};
  o.growth_interval = 0;
  EXPECT_TRUE(refused(o));
  o = {};
  o.dynamic = false;
  o.growth_factor = 0.5;  // a static scale reads no growth setting
  EXPECT_FALSE(refused(o));
}

TEST(GradScalerTest, StateRoundTripsAndImpossibleStatesAreRefused) {
  GradScalerOptions o;
  o.growth_interval = 10;
  GradScaler a(o);
  a.update(true, 0);
  a.update(false, 1);
  GradScaler b(o);
  b.load_state(a.state());
  EXPECT_EQ(b.state(), a.state());
  EXPECT_THROW(b.load_state({0.0, 0}), std::invalid_argument);
  EXPECT_THROW(b.load_state({std::nan(""), 0}), std::invalid_argument);
  EXPECT_THROW(b.load_state({1024.0, -1}), std::invalid_argument);
  // A count that reached this job's (lowered) growth_interval restarts.
  EXPECT_FALSE(b.load_state({1024.0, 10}));
  EXPECT_EQ(b.state(), (GradScalerState{1024.0, 0}));
  EXPECT_TRUE(b.load_state({512.0, 9}));
  EXPECT_EQ(b.state(), (GradScalerState{512.0, 9}));
  GradScalerOptions fixed;
  fixed.init_scale = 8;
  fixed.dynamic = false;
  GradScaler c(fixed);
  c.load_state({1024.0, 3});  // the job's static scale stands
  EXPECT_EQ(c.scale(), 8.0);
}

}  // namespace
}  // namespace rh::optim
