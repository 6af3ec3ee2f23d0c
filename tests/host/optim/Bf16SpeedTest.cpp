// bfloat16 on the CPU, through the runner-host binary: whoever trains in
// bfloat16 (AmpOptimWrapper, zero's bf16, fsdp's mixed_precision.param_dtype)
// measures a bfloat16 matrix product against float32 at set-up
// (rh/cpp/torch_bf16_speed.hpp) and says how they compare, once (rank 0): a
// warning with the factor when bfloat16 is more than 1.2x slower (Debian
// 13's LibTorch 2.6 on this Xeon: 3.4x), else a debug line (Debian 12's
// LibTorch 1.13 here: faster than float32). Which of the two depends on the
// LibTorch and the CPU; the test reads the factor and asserts the level
// that goes with it. Speed itself is never asserted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "common/TestUtil.hpp"

using rh::test::quote;

namespace {

class Bf16SpeedTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  // The quickstart, a few iterations, with `sets` (--set ...) and `args`.
  rh::test::CommandResult run(const std::string& name, const std::string& sets,
                              const std::string& args = "", const std::string& env = "") {
    return rh::test::run_command(
        "env -u RH_PLUGIN_PATH " + env + " " + quote(RH_RUNNER_HOST) + " --config " +
        quote(RH_QUICKSTART) + " --set work_dir=" + quote((dir / name).string()) +
        " --set train_cfg.max_epochs=1 --set data.train.dataset.num_samples=128" +
        " --set data.val.dataset.num_samples=128 --set hooks=[] --log-level debug " + sets + " " +
        args);
  }

  // The one line `what` says of bfloat16, at the level its factor calls for.
  static void expect_said_once(const rh::test::CommandResult& r, const std::string& what) {
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string escaped = std::regex_replace(what, std::regex(R"([.()\[\]])"), R"(\$&)");
    const std::regex line(R"(\[(warning|debug)\].*)" + escaped +
                          R"(: bfloat16 matrix products on this CPU take ([0-9.e+-]+)x as long )"
                          R"(as float32 \(LibTorch [0-9.a-z+]+, measured now\)(.*))");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, line)) << what << "\n" << r.output;
    const double factor = std::stod(m[2].str());
    EXPECT_GT(factor, 0);
    if (factor > 1.2) {
      EXPECT_EQ(m[1].str(), "warning") << m[0];
      EXPECT_EQ(m[3].str(), ": bfloat16 saves memory here but not time; float32 trains faster");
    } else {
      EXPECT_EQ(m[1].str(), "debug") << m[0];
      EXPECT_EQ(m[3].str(), "");
    }
    const std::string said = what + ": bfloat16 matrix products";
    size_t n = 0;
    for (size_t at = r.output.find(said); at != std::string::npos; at = r.output.find(said, at + 1))
      ++n;
    EXPECT_EQ(n, 1u) << "rank 0 alone says it\n" << r.output;
  }
};

TEST_F(Bf16SpeedTest, AmpOptimWrapperSaysHowBfloat16ComparesOnThisCpuOnce) {
  expect_said_once(run("amp", "--set optim_wrapper.type=AmpOptimWrapper"),
                   "AmpOptimWrapper (dtype bfloat16)");
  // Two ranks, every rank's log shown: still one line.
  expect_said_once(run("amp2", "--set optim_wrapper.type=AmpOptimWrapper --set strategy.type=ddp",
                       "--nproc-per-node 2 --master-port 0", "RH_LOG_ALL_RANKS=1"),
                   "AmpOptimWrapper (dtype bfloat16)");
  // float32: nothing to say.
  const auto fp32 = run("fp32", "");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.output;
  EXPECT_THAT(fp32.output, ::testing::Not(::testing::HasSubstr("bfloat16 matrix products")));
}

TEST_F(Bf16SpeedTest, ZeroAndFsdpInBfloat16SayItToo) {
  // (inputs_to_half: the quickstart's MLP takes its float32 features as they
  // come, unlike a gpt's token ids.)
  expect_said_once(run("zero",
                       "--set 'strategy={type: zero, zero_optimization: {stage: 1}, "
                       "bf16: {enabled: true}, inputs_to_half: true}'"),
                   "strategy 'zero' (bf16.enabled)");
  expect_said_once(
      run("fsdp", "--set 'strategy={type: fsdp, mixed_precision: {param_dtype: bfloat16}}'"),
      "strategy 'fsdp' (mixed_precision.param_dtype: bfloat16)");
}

}  // namespace
