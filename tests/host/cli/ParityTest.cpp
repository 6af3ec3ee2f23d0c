// `runner-host parity` through the binary: ddp against zero stage 2 agree
// at every step (and the table says which side keeps fp32 masters); an
// injected difference (tests/sdk/test_plugins/own_optimizer.cpp's
// perturb_step) is found at its step and tensor; bad usage exits 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;

namespace {

const char* const kJob =
    "seed: 3\n"
    "model: {type: mlp, in_features: 16, hidden: [32, 32], num_classes: 4}\n"
    "data:\n"
    "  train: {dataset: {type: synthetic_classification, num_samples: 256, num_features: 16,\n"
    "          num_classes: 4}, batch_size: 4, shuffle: true, num_workers: 0}\n"
    "optim_wrapper: {optimizer: {type: AdamW, lr: 0.01}}\n"
    "train_cfg: {by_epoch: true, max_epochs: 1}\n";

class ParityTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult parity(const std::string& job, const std::string& a, const std::string& b,
                                 const std::string& args) {
    const fs::path j = dir.write("job.yaml", job);
    const fs::path fa = dir.write("a.yaml", a);
    const fs::path fb = dir.write("b.yaml", b);
    return rh::test::run_command("env -u RH_PLUGIN_PATH " + quote(RH_RUNNER_HOST) +
                                 " parity --config " + quote(j.string()) + " --a " +
                                 quote(fa.string()) + " --b " + quote(fb.string()) + " " + args);
  }
};

TEST_F(ParityTest, DdpAndZeroStageTwoAgreeAtEveryStep) {
  std::string job = kJob;
  const std::string plain = "{optimizer: {type: AdamW, lr: 0.01}}";
  job.replace(job.find(plain), plain.size(),
              "{optimizer: {type: AdamW, lr: 0.01}, clip_grad: {max_norm: 0.5}}");
  // Tolerance 0: on 2 ranks both sum the same two halves (a + b = b + a) of
  // gradients divided by the same world size, the clip's norm is summed
  // exactly however the gradients are cut (rh/cpp/torch_exact_norm.hpp),
  // and AdamW is elementwise, so every step agrees bit for bit.
  const auto r = parity(job, "{type: ddp}\n", "{type: zero, zero_optimization: {stage: 2}}\n",
                        "--steps 4 --ranks 2 --tolerance 0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("A: {type: ddp}\n   parameters F32, fp32 masters none"));
  EXPECT_THAT(r.output, HasSubstr("precision: none of its own"));
  EXPECT_THAT(r.output, HasSubstr("fp32 masters F32"));  // zero keeps masters
  for (const char* step : {"\n    1 ", "\n    2 ", "\n    3 ", "\n    4 "})
    EXPECT_THAT(r.output, HasSubstr(step)) << r.output;
  EXPECT_THAT(r.output, HasSubstr("parity: A and B agree within 0 at every step"));
}

// What each side computes and reduces in: fsdp in bfloat16 (its
// mixed_precision, logged by the host from the precision_keys trait) against
// ddp in float32; they part at once, beyond a tolerance of 1e-5.
TEST_F(ParityTest, EachSidesPrecisionIsShown) {
  const auto r =
      parity(kJob, "{type: ddp}\n",
             "{type: fsdp, mixed_precision: {param_dtype: bfloat16, reduce_dtype: bfloat16}}\n",
             "--steps 2 --ranks 2");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("precision: none of its own (computes and reduces in the "
                                  "parameters')"));
  EXPECT_THAT(r.output, HasSubstr("precision: mixed_precision.param_dtype: bfloat16, "
                                  "mixed_precision.reduce_dtype: bfloat16"))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("parity: first difference beyond 1e-05: step 1"));
}

TEST_F(ParityTest, AnInjectedDifferenceIsFoundAtItsStepAndTensor) {
  const std::string perturbed =
      "{type: own_optimizer, plugin: " +
      (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_own_optimizer.so").string() +
      ", perturb_step: 3, perturb_param: layers.1.bias}\n";
  const auto r = parity(kJob, "{type: single}\n", perturbed, "--steps 5 --ranks 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("parity: first difference beyond 1e-05: step 3, tensor "
                                  "layers.1.bias"))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("0 (")) << r.output;  // steps 1 and 2: equal
}

TEST_F(ParityTest, BadUsageExitsTwo) {
  const auto r = rh::test::run_command(quote(RH_RUNNER_HOST) + " parity --config x.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--a is required"));
  const auto h = rh::test::run_command(quote(RH_RUNNER_HOST) + " parity --help");
  EXPECT_EQ(h.exit_code, 0) << h.output;
  EXPECT_THAT(h.output, HasSubstr("--tolerance"));
}

}  // namespace
