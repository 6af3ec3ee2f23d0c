// OptimWrapper: paramwise_cfg param groups, optimizer numerics against
// hand-computed steps, gradient clipping, and checkpoint state that resumes
// bitwise.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "host/optim/OptimTestUtil.hpp"
#include "optim/OptimWrapper.hpp"
#include "optim/ParamScheduler.hpp"
#include "rh/cpp/torch_compat.hpp"

namespace rh::optim {
namespace {

using test::Job;
using test::leaf;
using test::wave;

// A small "model": a conv-like weight and bias, a norm layer, a 1-D scale, a head.
std::vector<OptimParam> small_model() {
  return {
      {"backbone.conv.weight", leaf(wave({4, 3}, 0.1)), false},
      {"backbone.conv.bias", leaf(wave({4}, 0.2)), false},
      {"backbone.norm.weight", leaf(wave({4}, 0.3)), true},
      {"backbone.norm.bias", leaf(wave({4}, 0.4)), true},
      {"backbone.scale", leaf(wave({4}, 0.5)), false},
      {"head.fc.weight", leaf(wave({2, 4}, 0.6)), false},
      {"head.fc.bias", leaf(wave({2}, 0.7)), false},
  };
}

struct GroupView {
  std::vector<std::string> names;
  double lr;
  double weight_decay;
};

double weight_decay_of(const torch::optim::OptimizerOptions& options) {
  if (auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&options)) {
    return sgd->weight_decay();
  }
  if (auto* adamw = dynamic_cast<const torch::optim::AdamWOptions*>(&options)) {
    return adamw->weight_decay();
  }
  return dynamic_cast<const torch::optim::AdamOptions&>(options).weight_decay();
}

std::vector<GroupView> groups_of(OptimWrapper& wrapper, const std::vector<OptimParam>& params) {
  std::vector<GroupView> views;
  for (const auto& group : wrapper.optimizer().param_groups()) {
    GroupView view{{}, group.options().get_lr(), weight_decay_of(group.options())};
    for (const auto& t : group.params()) {
      for (const auto& p : params) {
        if (p.param.is_same(t)) view.names.push_back(p.name);
      }
    }
    views.push_back(view);
  }
  return views;
}

void expect_groups(OptimWrapper& wrapper, const std::vector<OptimParam>& params,
                   const std::vector<GroupView>& want) {
  const auto got = groups_of(wrapper, params);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].names, want[i].names) << "group " << i;
    // Within 4 ulp (DOUBLE_EQ): a group's value is the base times at most
    // two multipliers, each product rounded once (<= 2 ulp from the literal).
    EXPECT_DOUBLE_EQ(got[i].lr, want[i].lr) << "group " << i;
    EXPECT_DOUBLE_EQ(got[i].weight_decay, want[i].weight_decay) << "group " << i;
  }
}

TEST(OptimWrapperTest, WithoutParamwiseCfgAllParametersShareOneGroup) {
  Job job("optim_wrapper:\n  optimizer: {type: AdamW, lr: 0.01}\n");
  auto params = small_model();
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  expect_groups(wrapper, params,
                {{{"backbone.conv.weight", "backbone.conv.bias", "backbone.norm.weight",
                   "backbone.norm.bias", "backbone.scale", "head.fc.weight", "head.fc.bias"},
                  0.01,
                  0.01}});
  EXPECT_EQ(wrapper.accumulative_counts(), 1);
  EXPECT_EQ(wrapper.lrs(), std::vector<double>{0.01});
  EXPECT_EQ(wrapper.base_lrs(), std::vector<double>{0.01});
}

TEST(OptimWrapperTest, ParamwiseCfgFollowsMMEngineRules) {
  Job job(R"(
optim_wrapper:
  optimizer: {type: SGD, lr: 0.1, momentum: 0.9, weight_decay: 0.0001}
  paramwise_cfg:
    bias_lr_mult: 2.0
    bias_decay_mult: 0.0
    norm_decay_mult: 0.0
    flat_decay_mult: 0.5
    custom_keys:
      head: {lr_mult: 10.0}
      head.fc: {lr_mult: 5.0, decay_mult: 0.0}
  accumulative_counts: 4
)");
  auto params = small_model();
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  expect_groups(wrapper, params,
                {
                    {{"backbone.conv.weight"}, 0.1, 1e-4},
                    {{"backbone.conv.bias"}, 0.2, 0.0},                        // bias
                    {{"backbone.norm.weight", "backbone.norm.bias"}, 0.1, 0},  // norm (no bias lr)
                    {{"backbone.scale"}, 0.1, 0.5e-4},                         // flat
                    {{"head.fc.weight", "head.fc.bias"}, 0.5, 0.0},  // 'head.fc' beats 'head'
                });
  EXPECT_EQ(wrapper.accumulative_counts(), 4);
}

TEST(OptimWrapperTest, FlatDecayMultTakesOneDimParametersWhoseOwnRuleIsUnset) {
  // Without norm_decay_mult and bias_decay_mult, MMEngine's elif chain falls
  // through to flat_decay_mult for 1-D norm and bias parameters too.
  Job job(R"(
optim_wrapper:
  optimizer: {type: Adam, lr: 0.001, weight_decay: 0.1}
  paramwise_cfg: {flat_decay_mult: 0.0, bias_lr_mult: 3.0}
)");
  auto params = small_model();
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  expect_groups(wrapper, params,
                {
                    {{"backbone.conv.weight", "head.fc.weight"}, 0.001, 0.1},
                    {{"backbone.conv.bias", "head.fc.bias"}, 0.003, 0.0},
                    {{"backbone.norm.weight", "backbone.norm.bias", "backbone.scale"}, 0.001, 0.0},
                });
}

TEST(OptimWrapperTest, CustomKeysLongestFirstThenAlphabetical) {
  Job job(R"(
optim_wrapper:
  optimizer: {type: SGD, lr: 1.0, weight_decay: 1.0}
  paramwise_cfg:
    norm_decay_mult: 0.5
    custom_keys:
      b: {lr_mult: 2.0}
      ba: {lr_mult: 3.0}
      ab: {lr_mult: 4.0}
      blocks.1.: {lr_mult: 5.0, decay_mult: 0.25}
)");
  std::vector<OptimParam> params = {
      {"blocks.1.ab.ba", leaf(wave({2}, 1)), true},  // 'blocks.1.' (longest) wins over norm
      {"x.ab.ba", leaf(wave({2}, 2)), false},        // 'ab' before 'ba' (same length)
      {"x.ba", leaf(wave({2}, 3)), false},           // 'ba' before 'b'
      {"y.b", leaf(wave({2}, 4)), false},            // 'b'
      {"norm.w", leaf(wave({2}, 5)), true},          // no key: norm rule
  };
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  expect_groups(wrapper, params,
                {{{"blocks.1.ab.ba"}, 5.0, 0.25},
                 {{"x.ab.ba"}, 4.0, 1.0},
                 {{"x.ba"}, 3.0, 1.0},
                 {{"y.b"}, 2.0, 1.0},
                 {{"norm.w"}, 1.0, 0.5}});
}

TEST(OptimWrapperTest, ParametersWithoutGradKeepTheOptimizerOptions) {
  Job job(R"(
optim_wrapper:
  optimizer: {type: SGD, lr: 1.0}
  paramwise_cfg: {bias_lr_mult: 0.5}
)");
  std::vector<OptimParam> params = {{"fc.bias", leaf(wave({2}, 1)), false},
                                    {"frozen.bias", wave({2}, 2), false}};
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  expect_groups(wrapper, params, {{{"fc.bias"}, 0.5, 0.0}, {{"frozen.bias"}, 1.0, 0.0}});
}

TEST(OptimWrapperTest, DecayMultWithoutWeightDecayIsAConfigError) {
  Job job(R"(
optim_wrapper:
  optimizer: {type: AdamW}
  paramwise_cfg: {norm_decay_mult: 0.0}
)");
  try {
    OptimWrapper wrapper(job.at("optim_wrapper"), small_model());
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "job.yaml:4:36: optim_wrapper.paramwise_cfg.norm_decay_mult: needs "
                 "optimizer.weight_decay to be written out (the multiplier scales it; MMEngine "
                 "requires it too)");
  }
}

TEST(OptimWrapperTest, ParameterGivenTwiceIsAnError) {
  Job job("optim_wrapper:\n  optimizer: {type: SGD, lr: 1.0}\n");
  const at::Tensor w = leaf(wave({2}, 1));
  EXPECT_THROW(OptimWrapper(job.at("optim_wrapper"), {{"a", w, false}, {"b", w, false}}),
               std::invalid_argument);
}

// --- numerics ---------------------------------------------------------------

// One double parameter of 3 elements, stepped twice with fixed gradients.
struct TwoSteps {
  std::vector<double> p0 = {0.5, -1.0, 2.0};
  std::vector<std::vector<double>> grads = {{0.1, -0.2, 0.3}, {-0.4, 0.5, 0.05}};

  at::Tensor run(const std::string& optimizer_yaml) const {
    Job job("optim_wrapper:\n  optimizer: " + optimizer_yaml + "\n");
    const at::Tensor p = leaf(at::tensor(p0, at::kDouble));
    OptimWrapper wrapper(job.at("optim_wrapper"), {{"p", p, false}});
    for (const auto& g : grads) {
      p.mutable_grad() = at::tensor(g, at::kDouble);
      wrapper.step();
      wrapper.zero_grad();
      EXPECT_FALSE(p.grad().defined());
    }
    return p.detach();
  }
};

// Within 1e-12: both sides compute in double (u_d = 2^-53), ~10 roundings
// a step on values |p| <= 2.1 (the gradients are far above eps, so m/sqrt(v)
// is well conditioned): <= 2 steps x 2 sides x 10·u_d·2.1 = 9e-15, 100x under.
void expect_values(const at::Tensor& got, const std::vector<double>& want) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[static_cast<int64_t>(i)].item<double>(), want[i], 1e-12) << "element " << i;
  }
}

TEST(OptimWrapperTest, SgdMatchesHandComputedSteps) {
  const TwoSteps run;
  const double lr = 0.1, momentum = 0.9, dampening = 0.1, wd = 0.01;
  std::vector<double> want = run.p0;
  for (size_t i = 0; i < want.size(); ++i) {
    double p = run.p0[i];
    double d = run.grads[0][i] + wd * p;
    double buf = d;  // first step: the buffer is the gradient itself
    p -= lr * buf;
    d = run.grads[1][i] + wd * p;
    buf = momentum * buf + (1 - dampening) * d;
    p -= lr * buf;
    want[i] = p;
  }
  expect_values(run.run("{type: SGD, lr: 0.1, momentum: 0.9, dampening: 0.1, weight_decay: 0.01}"),
                want);

  for (size_t i = 0; i < want.size(); ++i) {  // nesterov (dampening 0)
    double p = run.p0[i];
    double buf = run.grads[0][i];
    p -= lr * (run.grads[0][i] + momentum * buf);
    buf = momentum * buf + run.grads[1][i];
    p -= lr * (run.grads[1][i] + momentum * buf);
    want[i] = p;
  }
  expect_values(run.run("{type: SGD, lr: 0.1, momentum: 0.9, nesterov: true}"), want);
}

// Adam / AdamW by the book (Kingma & Ba; Loshchilov & Hutter), amsgrad optional.
std::vector<double> adam_by_hand(const TwoSteps& run, double lr, double b1, double b2, double eps,
                                 double l2, double decoupled, bool amsgrad) {
  std::vector<double> out;
  for (size_t i = 0; i < run.p0.size(); ++i) {
    double p = run.p0[i], m = 0, v = 0, v_max = 0;
    for (size_t k = 0; k < run.grads.size(); ++k) {
      const double step = static_cast<double>(k + 1);
      p *= 1 - lr * decoupled;
      const double g = run.grads[k][i] + l2 * p;
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g * g;
      v_max = std::max(v_max, v);
      const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
      const double denom = std::sqrt(amsgrad ? v_max : v) / std::sqrt(bc2) + eps;
      p -= lr / bc1 * m / denom;
    }
    out.push_back(p);
  }
  return out;
}

TEST(OptimWrapperTest, AdamMatchesHandComputedSteps) {
  const TwoSteps run;
  expect_values(run.run("{type: Adam, lr: 0.01, betas: [0.8, 0.9], eps: 1.0e-6, "
                        "weight_decay: 0.1}"),
                adam_by_hand(run, 0.01, 0.8, 0.9, 1e-6, 0.1, 0, false));
  expect_values(run.run("{type: Adam, lr: 0.01, betas: [0.8, 0.9], amsgrad: true}"),
                adam_by_hand(run, 0.01, 0.8, 0.9, 1e-8, 0, 0, true));
}

TEST(OptimWrapperTest, AdamWMatchesHandComputedSteps) {
  const TwoSteps run;
  // Default weight_decay 0.01, decoupled.
  expect_values(run.run("{type: AdamW, lr: 0.01}"),
                adam_by_hand(run, 0.01, 0.9, 0.999, 1e-8, 0, 0.01, false));
  expect_values(run.run("{type: AdamW, lr: 0.02, weight_decay: 0.5, amsgrad: true}"),
                adam_by_hand(run, 0.02, 0.9, 0.999, 1e-8, 0, 0.5, true));
}

// fused: true (torch.optim's fused=True): where this LibTorch has the
// kernel (2.0+ on a GPU, 2.4+ on the CPU), the book's Adam / AdamW within
// float32 rounding, on torch::optim's state (a resume through
// state_tensors continues bit for bit); elsewhere refused, naming the key.
TEST(OptimWrapperTest, FusedAdamFollowsTheBookAndResumesBitwiseOrIsRefused) {
  const c10::Device device =
      torch::cuda::is_available() ? c10::Device(at::kCUDA, 0) : c10::Device(at::kCPU);
  const TwoSteps run;
  auto fused_run = [&](const std::string& optimizer, std::vector<at::Tensor> grads, int from,
                       const std::vector<model::NamedTensor>* state, at::Tensor p0) {
    Job job("optim_wrapper:\n  optimizer: " + optimizer + "\n");
    const at::Tensor p = p0.detach().clone().to(device).set_requires_grad(true);
    OptimWrapper wrapper(job.at("optim_wrapper"), {{"p", p, false}});
    EXPECT_TRUE(wrapper.fused());
    if (state != nullptr) wrapper.load_state_tensors(*state);
    for (size_t k = static_cast<size_t>(from); k < grads.size(); ++k) {
      p.mutable_grad() = grads[k].to(device);
      wrapper.step();
      wrapper.zero_grad();
    }
    return std::make_pair(p.detach().cpu(), wrapper.state_tensors());
  };
  const at::Tensor p0 = at::tensor(run.p0, at::kDouble).to(at::kFloat);
  std::vector<at::Tensor> grads;
  for (const auto& g : run.grads) grads.push_back(at::tensor(g, at::kDouble).to(at::kFloat));
  const std::string adamw =
      "{type: AdamW, lr: 0.02, weight_decay: 0.5, amsgrad: true, fused: true}";
  if (!compat::fused_adam_supports(device)) {
    Job job("optim_wrapper:\n  optimizer: " + adamw + "\n");
    try {
      OptimWrapper wrapper(job.at("optim_wrapper"), {{"p", leaf(p0), false}});
      FAIL() << "fused: true must be refused on LibTorch " << TORCH_VERSION;
    } catch (const config::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("optim_wrapper.optimizer.fused: the fused AdamW kernel "
                                           "needs LibTorch 2.0+ on a GPU or 2.4+ on the CPU"),
                std::string::npos)
          << e.what();
    }
    return;
  }
  // Within 1e-6 of the double book: the float32 update rounds p (|p| <= 2.02)
  // twice a step at most (decay, step), 2u·2.02 = 2.4e-7 a step (u = 2^-24),
  // 4.8e-7 over 2; the gradients' rounding to float32 leaves step 1's m̂/sqrt(v̂)
  // (= ±1) unchanged and moves step 2's by ~u·lr. 1e-6 leaves 2x.
  auto near_book = [](const at::Tensor& got, const std::vector<double>& want) {
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[static_cast<int64_t>(i)].item<double>(), want[i], 1e-6) << "element " << i;
  };
  near_book(fused_run(adamw, grads, 0, nullptr, p0).first,
            adam_by_hand(run, 0.02, 0.9, 0.999, 1e-8, 0, 0.5, true));
  near_book(fused_run("{type: Adam, lr: 0.01, betas: [0.8, 0.9], eps: 1.0e-6, weight_decay: 0.1, "
                      "fused: true}",
                      grads, 0, nullptr, p0)
                .first,
            adam_by_hand(run, 0.01, 0.8, 0.9, 1e-6, 0.1, 0, false));
  // Four steps, then the state through state_tensors into a new wrapper.
  for (int k = 0; k < 5; ++k) grads.push_back(wave({3}, 0.3 * k));
  const auto straight = fused_run(adamw, grads, 0, nullptr, p0);
  const std::vector<at::Tensor> first(grads.begin(), grads.begin() + 4);
  const auto half = fused_run(adamw, first, 0, nullptr, p0);
  const auto resumed = fused_run(adamw, grads, 4, &half.second, half.first);
  EXPECT_TRUE(torch::equal(straight.first, resumed.first))
      << straight.first << " vs " << resumed.first;
  ASSERT_EQ(straight.second.size(), resumed.second.size());
  for (size_t i = 0; i < straight.second.size(); ++i)
    EXPECT_TRUE(torch::equal(straight.second[i].tensor, resumed.second[i].tensor))
        << straight.second[i].name;
}

TEST(OptimWrapperTest, ScaleLrMultipliesLrsAndBaseLrs) {
  Job job(R"(
optim_wrapper:
  optimizer: {type: SGD, lr: 0.1}
  paramwise_cfg: {bias_lr_mult: 2.0}
)");
  auto params = small_model();
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  wrapper.scale_lr(4.0);
  EXPECT_EQ(wrapper.lrs(), (std::vector<double>{0.4, 0.8}));
  EXPECT_EQ(wrapper.base_lrs(), (std::vector<double>{0.4, 0.8}));
  wrapper.set_lrs({0.01, 0.02});  // a scheduler's doing: base lrs stay
  EXPECT_EQ(wrapper.lrs(), (std::vector<double>{0.01, 0.02}));
  EXPECT_EQ(wrapper.base_lrs(), (std::vector<double>{0.4, 0.8}));
  EXPECT_THROW(wrapper.set_lrs({1.0}), std::invalid_argument);
}

// --- clipping ---------------------------------------------------------------

TEST(OptimWrapperTest, ClipGradReturnsThePreClipNormAndClips) {
  Job job(R"(
optim_wrapper:
  optimizer: {type: SGD, lr: 1.0}
  clip_grad: {max_norm: 1.3}
)");
  const at::Tensor a = leaf(at::zeros({2}, at::kDouble));
  const at::Tensor b = leaf(at::zeros({1}, at::kDouble));
  const at::Tensor unused = leaf(at::zeros({1}, at::kDouble));
  OptimWrapper wrapper(job.at("optim_wrapper"),
                       {{"a", a, false}, {"b", b, false}, {"u", unused, false}});
  a.mutable_grad() = at::tensor({3.0, 4.0}, at::kDouble);
  b.mutable_grad() = at::tensor({12.0}, at::kDouble);
  EXPECT_EQ(wrapper.step(), 13.0);  // sqrt(9 + 16 + 144): every step exact
  const double coef = 1.3 / (13.0 + 1e-6);
  expect_values(a.detach(), {-3.0 * coef, -4.0 * coef});  // lr 1: p = -clipped grad
  expect_values(b.detach(), {-12.0 * coef});
  expect_values(unused.detach(), {0.0});

  // Under max_norm: untouched gradients, the norm still reported.
  wrapper.zero_grad();
  a.mutable_grad() = at::tensor({0.3, 0.4}, at::kDouble);
  const at::Tensor before = a.detach().clone();
  // 0.3 and 0.4 are not binary fractions: their squares' sum rounded once,
  // then sqrt: within 2 ulp of 0.5 (DOUBLE_EQ: 4).
  EXPECT_DOUBLE_EQ(wrapper.step(), 0.5);
  expect_values(a.detach(), {before[0].item<double>() - 0.3, before[1].item<double>() - 0.4});
}

TEST(OptimWrapperTest, ClipGradInfinityNormAndOff) {
  Job inf(
      "optim_wrapper:\n  optimizer: {type: SGD, lr: 1.0}\n  clip_grad: {max_norm: 1.0, "
      "norm_type: .inf}\n");
  const at::Tensor a = leaf(at::zeros({2}, at::kDouble));
  OptimWrapper clipped(inf.at("optim_wrapper"), {{"a", a, false}});
  a.mutable_grad() = at::tensor({-3.0, 2.0}, at::kDouble);
  EXPECT_EQ(clipped.step(), 3.0);  // a max: exact

  Job off("optim_wrapper:\n  optimizer: {type: SGD, lr: 1.0}\n  clip_grad: null\n");
  const at::Tensor b = leaf(at::zeros({2}, at::kDouble));
  OptimWrapper plain(off.at("optim_wrapper"), {{"b", b, false}});
  b.mutable_grad() = at::tensor({-3.0, 2.0}, at::kDouble);
  EXPECT_EQ(plain.step(), -1.0);
  expect_values(b.detach(), {3.0, -2.0});
}

// --- checkpoint state -------------------------------------------------------

std::vector<OptimParam> linear_model(const std::vector<at::Tensor>& values) {
  return {{"fc.weight", leaf(values[0]), false},
          {"fc.bias", leaf(values[1]), false},
          {"norm.weight", leaf(values[2]), true},
          {"unused.weight", leaf(values[3]), false}};  // never gets a gradient
}

std::vector<at::Tensor> initial_values() {
  return {wave({5, 4}, 0.1), wave({5}, 0.2), wave({5}, 0.3), wave({3}, 0.4)};
}

// One training iteration `k` on fixed data: loss, backward, step, zero_grad.
void train_step(OptimWrapper& wrapper, const std::vector<OptimParam>& params, int64_t k) {
  const at::Tensor x = wave({8, 4}, 1.0 + static_cast<double>(k));
  const at::Tensor y = wave({8, 5}, 2.0 + 0.5 * static_cast<double>(k));
  const at::Tensor out = (x.matmul(params[0].param.t()) + params[1].param) * params[2].param;
  (out - y).pow(2).mean().backward();
  wrapper.step();
  wrapper.zero_grad();
}

const char* kWarmupSchedule = R"(
param_scheduler:
  - {type: LinearLR, start_factor: 0.1, by_epoch: false, begin: 0, end: 4}
  - {type: CosineAnnealingLR, by_epoch: false, begin: 0, end: 12, eta_min: 0.0001}
)";

// Runs iterations [from, to) with the schedule applied as the runner does.
void train(OptimWrapper& wrapper, ParamSchedulers& schedulers,
           const std::vector<OptimParam>& params, int64_t from, int64_t to) {
  schedulers.apply(from, 0);
  for (int64_t k = from; k < to; ++k) {
    train_step(wrapper, params, k);
    schedulers.apply(k + 1, 0);
  }
}

class StateRoundTripTest : public ::testing::TestWithParam<const char*> {};

TEST_P(StateRoundTripTest, ResumeContinuesBitwise) {
  const std::string optim_yaml = GetParam();
  Job job(optim_yaml + kWarmupSchedule);
  constexpr int64_t kSteps = 9, kResumeAt = 4;

  // Uninterrupted.
  auto straight = linear_model(initial_values());
  OptimWrapper straight_optim(job.at("optim_wrapper"), straight);
  ParamSchedulers straight_sched(&job.at("param_scheduler"), straight_optim, 1);
  train(straight_optim, straight_sched, straight, 0, kSteps);

  // Interrupted at kResumeAt: parameters and optimizer state go through copies.
  auto first = linear_model(initial_values());
  OptimWrapper first_optim(job.at("optim_wrapper"), first);
  ParamSchedulers first_sched(&job.at("param_scheduler"), first_optim, 1);
  train(first_optim, first_sched, first, 0, kResumeAt);
  const std::vector<model::NamedTensor> saved = first_optim.state_tensors();
  for (const auto& t : saved) {
    EXPECT_TRUE(t.tensor.device().is_cpu()) << t.name;
    EXPECT_TRUE(t.tensor.is_contiguous()) << t.name;
  }
  std::vector<at::Tensor> copies;
  for (const auto& p : first) copies.push_back(p.param.detach().clone());

  // adopt: the state tensors are the caller's to give away (a resume's,
  // read for the purpose) and become the optimizer's state without a copy;
  // either way training continues bitwise.
  for (const bool adopt : {false, true}) {
    SCOPED_TRACE(adopt ? "adopting the given tensors" : "copying them");
    std::vector<model::NamedTensor> given;
    for (const auto& t : saved) given.push_back({t.name, adopt ? t.tensor.clone() : t.tensor});
    auto resumed = linear_model(copies);
    OptimWrapper resumed_optim(job.at("optim_wrapper"), resumed);
    ParamSchedulers resumed_sched(&job.at("param_scheduler"), resumed_optim, 1);
    resumed_optim.load_state_tensors(given, adopt);
    // The loaded state is the saved one; shared with it only when adopted
    // (a step count is always a new tensor).
    const auto reloaded = resumed_optim.state_tensors(/*copy=*/false);
    ASSERT_EQ(reloaded.size(), given.size());
    for (size_t i = 0; i < given.size(); ++i) {
      EXPECT_EQ(reloaded[i].name, given[i].name);
      EXPECT_TRUE(torch::equal(reloaded[i].tensor, given[i].tensor)) << given[i].name;
      const bool step = reloaded[i].name.size() > 5 &&
                        reloaded[i].name.compare(reloaded[i].name.size() - 5, 5, ".step") == 0;
      if (!step) {
        EXPECT_EQ(reloaded[i].tensor.data_ptr() == given[i].tensor.data_ptr(), adopt)
            << given[i].name;
      }
    }
    train(resumed_optim, resumed_sched, resumed, kResumeAt, kSteps);

    for (size_t i = 0; i < straight.size(); ++i) {
      EXPECT_TRUE(torch::equal(straight[i].param, resumed[i].param)) << straight[i].name;
    }
    const auto straight_state = straight_optim.state_tensors();
    const auto resumed_state = resumed_optim.state_tensors();
    ASSERT_EQ(straight_state.size(), resumed_state.size());
    for (size_t i = 0; i < straight_state.size(); ++i) {
      EXPECT_EQ(straight_state[i].name, resumed_state[i].name);
      EXPECT_TRUE(torch::equal(straight_state[i].tensor, resumed_state[i].tensor))
          << straight_state[i].name;
    }
  }
  // The training moved the parameters (the test is not vacuous).
  EXPECT_FALSE(torch::equal(straight[0].param, leaf(initial_values()[0])));
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, StateRoundTripTest,
    ::testing::Values(
        "optim_wrapper:\n  optimizer: {type: SGD, lr: 0.1, momentum: 0.9, nesterov: true, "
        "weight_decay: 0.001}\n  paramwise_cfg: {bias_lr_mult: 2.0, norm_decay_mult: 0.0}\n"
        "  clip_grad: {max_norm: 0.5}\n",
        "optim_wrapper:\n  optimizer: {type: SGD, lr: 0.1, momentum: 0.5, dampening: 0.2}\n",
        "optim_wrapper:\n  optimizer: {type: Adam, lr: 0.01, amsgrad: true, weight_decay: 0.01}\n"
        "  clip_grad: {max_norm: 0.1, norm_type: 1}\n",
        "optim_wrapper:\n  optimizer: {type: AdamW, lr: 0.01, betas: [0.8, 0.95]}\n"
        "  paramwise_cfg: {custom_keys: {norm: {lr_mult: 0.5}}}\n"));

TEST(OptimWrapperStateTest, EntriesAreNamedByParameterAndField) {
  Job job("optim_wrapper:\n  optimizer: {type: Adam, lr: 0.01, amsgrad: true}\n");
  auto params = linear_model(initial_values());
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  train_step(wrapper, params, 0);
  train_step(wrapper, params, 1);
  std::map<std::string, at::Tensor> state;
  for (const auto& t : wrapper.state_tensors()) state[t.name] = t.tensor;
  EXPECT_EQ(state.size(), 16u);  // 4 parameters x 4 fields
  EXPECT_EQ(state.at("fc.weight.step").dim(), 0);
  EXPECT_EQ(state.at("fc.weight.step").scalar_type(), at::kLong);
  EXPECT_EQ(state.at("fc.weight.step").item<int64_t>(), 2);
  EXPECT_EQ(state.at("unused.weight.step").item<int64_t>(), 0);  // never stepped: fresh state
  EXPECT_EQ(state.at("unused.weight.exp_avg").count_nonzero().item<int64_t>(), 0);
  EXPECT_EQ(state.at("fc.weight.exp_avg").sizes(), at::IntArrayRef({5, 4}));
  EXPECT_TRUE(state.count("fc.bias.max_exp_avg_sq"));

  Job sgd("optim_wrapper:\n  optimizer: {type: SGD, lr: 0.01, momentum: 0.9}\n");
  auto sgd_params = linear_model(initial_values());
  OptimWrapper sgd_wrapper(sgd.at("optim_wrapper"), sgd_params);
  EXPECT_TRUE(sgd_wrapper.state_tensors().empty());
  train_step(sgd_wrapper, sgd_params, 0);
  std::vector<std::string> names;
  for (const auto& t : sgd_wrapper.state_tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc.weight.momentum_buffer", "fc.bias.momentum_buffer",
                                             "norm.weight.momentum_buffer"}));
}

std::string load_error(OptimWrapper& wrapper, const std::vector<model::NamedTensor>& tensors) {
  try {
    wrapper.load_state_tensors(tensors);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected std::invalid_argument";
  return "";
}

TEST(OptimWrapperStateTest, MissingExtraAndMismatchedEntriesAreNamed) {
  Job job("optim_wrapper:\n  optimizer: {type: AdamW, lr: 0.01}\n");
  auto params = linear_model(initial_values());
  OptimWrapper wrapper(job.at("optim_wrapper"), params);
  train_step(wrapper, params, 0);
  const auto good = wrapper.state_tensors();

  auto missing = good;
  missing.erase(missing.begin() + 1);  // fc.weight.exp_avg
  EXPECT_EQ(load_error(wrapper, missing),
            "optimizer state (AdamW) does not fit the parameters: missing 1 entry: "
            "fc.weight.exp_avg. Was the checkpoint saved with another optimizer type, amsgrad "
            "setting or model?");

  auto extra = good;
  extra.push_back({"fc.weight.momentum_buffer", at::zeros({5, 4})});
  extra.push_back({"head.weight.step", at::scalar_tensor(1, at::kLong)});
  EXPECT_EQ(load_error(wrapper, extra),
            "optimizer state (AdamW) does not fit the parameters: unexpected 2 entries: "
            "fc.weight.momentum_buffer, head.weight.step. Was the checkpoint saved with another "
            "optimizer type, amsgrad setting or model?");

  auto shape = good;
  shape[1].tensor = at::zeros({4, 5});
  shape[0].tensor = at::zeros({1}, at::kLong);
  const std::string message = load_error(wrapper, shape);
  EXPECT_NE(message.find("'fc.weight.exp_avg' has shape [4, 5], expected [5, 4]"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("'fc.weight.step' has shape [1], expected []"), std::string::npos)
      << message;

  auto dtype = good;
  dtype[2].tensor = dtype[2].tensor.to(at::kDouble);
  EXPECT_NE(load_error(wrapper, dtype)
                .find("'fc.weight.exp_avg_sq' has dtype Double, expected Float (the parameter's)"),
            std::string::npos);

  auto twice = good;
  twice.push_back(good[0]);
  EXPECT_EQ(load_error(wrapper, twice),
            "optimizer state (AdamW): entry 'fc.weight.step' appears twice");

  // A failed load leaves the state as it was.
  const auto after = wrapper.state_tensors();
  for (size_t i = 0; i < good.size(); ++i)
    EXPECT_TRUE(torch::equal(after[i].tensor, good[i].tensor));

  Job amsgrad("optim_wrapper:\n  optimizer: {type: AdamW, lr: 0.01, amsgrad: true}\n");
  auto other = linear_model(initial_values());
  OptimWrapper amsgrad_wrapper(amsgrad.at("optim_wrapper"), other);
  EXPECT_NE(load_error(amsgrad_wrapper, good)
                .find("optimizer state (AdamW, amsgrad) does not fit the parameters: missing 4 "
                      "entries: fc.bias.max_exp_avg_sq, fc.weight.max_exp_avg_sq, "
                      "norm.weight.max_exp_avg_sq, unused.weight.max_exp_avg_sq."),
            std::string::npos);
}

}  // namespace
}  // namespace rh::optim
