// ParamSchedulers: the closed-form lr against a port of MMEngine's recursive
// (chainable) schedulers, stepped the way MMEngine's ParamSchedulerHook steps
// them, for each type alone, the usual chains and convert_to_iter_based.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "host/optim/OptimTestUtil.hpp"
#include "optim/ParamScheduler.hpp"

namespace rh::optim {
namespace {

using test::Job;
using test::leaf;
using test::wave;

constexpr double kInf = std::numeric_limits<double>::infinity();

// --- the reference: mmengine/optim/scheduler/param_scheduler.py, ported -----
//
// Each scheduler edits the param groups' current lrs in place, multiplying by a
// ratio (or, for cosine and poly, an affine step), exactly as the Python does.
struct RefScheduler {
  std::string type;
  bool by_epoch = true;
  double begin = 0, end = kInf;
  std::map<std::string, double> arg;  // type parameters, with MMEngine's defaults filled in
  std::vector<double> milestones;
  std::vector<double> base_values;  // group['initial_lr']
  int64_t last_step = -1;
  int64_t global_step = 0;

  double get(const std::string& key) const { return arg.at(key); }

  // _ParamScheduler.step()
  void step(std::vector<double>& lrs) {
    if (begin <= static_cast<double>(global_step) && static_cast<double>(global_step) < end) {
      last_step += 1;
      lrs = get_value(lrs);
    }
    global_step += 1;
  }

  std::vector<double> get_value(const std::vector<double>& lrs) const {
    std::vector<double> out = lrs;
    const double t = static_cast<double>(last_step);
    for (size_t g = 0; g < lrs.size(); ++g) {
      const double lr = lrs[g];
      const double base = base_values[g];
      if (type == "LinearLR") {
        const double s = get("start_factor"), e = get("end_factor");
        const double total = end - begin - 1;
        if (last_step == 0) {
          out[g] = lr * s;
        } else {
          out[g] = lr * (1. + (e - s) / (total * s + (t - 1) * (e - s)));
        }
      } else if (type == "ConstantLR") {
        const double total = end - begin - 1;
        if (last_step == 0) {
          out[g] = lr * get("factor");
        } else if (t != total) {
          out[g] = lr;
        } else {
          out[g] = lr * (1.0 / get("factor"));
        }
      } else if (type == "StepLR") {
        const auto step_size = static_cast<int64_t>(get("step_size"));
        out[g] = (last_step == 0 || last_step % step_size != 0) ? lr : lr * get("gamma");
      } else if (type == "MultiStepLR") {
        int count = 0;
        for (double m : milestones) count += (m == t);
        out[g] = count == 0 ? lr : lr * std::pow(get("gamma"), count);
      } else if (type == "ExponentialLR") {
        out[g] = last_step == 0 ? lr : lr * get("gamma");
      } else if (type == "CosineAnnealingLR") {
        const double t_max = get("T_max");
        const double eta =
            arg.count("eta_min_ratio") ? base * get("eta_min_ratio") : get("eta_min");
        const double pi = 3.14159265358979323846;
        if (last_step == 0) {
          out[g] = lr;
        } else if (std::fmod(t - 1 - t_max, 2 * t_max) == 0) {
          out[g] = lr + (base - eta) * (1 - std::cos(pi / t_max)) / 2;
        } else {
          out[g] =
              (1 + std::cos(pi * t / t_max)) / (1 + std::cos(pi * (t - 1) / t_max)) * (lr - eta) +
              eta;
        }
      } else if (type == "PolyLR") {
        const double total = end - begin - 1;
        const double eta = get("eta_min");
        out[g] = last_step == 0
                     ? lr
                     : (lr - eta) * std::pow(1 - 1 / (total - t + 1), get("power")) + eta;
      } else {
        ADD_FAILURE() << "no reference for " << type;
      }
    }
    return out;
  }
};

// A scheduler as a test writes it: type, common keys and type parameters.
struct Spec {
  std::string type;
  bool by_epoch = true;
  double begin = 0, end = kInf;
  bool convert_to_iter_based = false;
  std::map<std::string, double> arg;
  std::vector<double> milestones;
};

std::string yaml_of(const std::vector<Spec>& specs) {
  std::string text = "param_scheduler:\n";
  for (const Spec& s : specs) {
    text += "  - {type: " + s.type + ", by_epoch: " + (s.by_epoch ? "true" : "false") +
            ", begin: " + std::to_string(static_cast<int64_t>(s.begin));
    if (s.end != kInf) text += ", end: " + std::to_string(static_cast<int64_t>(s.end));
    if (s.convert_to_iter_based) text += ", convert_to_iter_based: true";
    for (const auto& [key, value] : s.arg) {
      char number[64];
      std::snprintf(number, sizeof number, "%.17g", value);
      text += ", " + key + ": " + number;
    }
    if (!s.milestones.empty()) {
      text += ", milestones: [";
      for (size_t i = 0; i < s.milestones.size(); ++i) {
        text += (i > 0 ? ", " : "") + std::to_string(static_cast<int64_t>(s.milestones[i]));
      }
      text += "]";
    }
    text += "}\n";
  }
  return text;
}

// MMEngine's constructor defaults and build_iter_from_epoch.
RefScheduler reference_of(const Spec& spec, int64_t iters_per_epoch) {
  RefScheduler r;
  r.type = spec.type;
  r.by_epoch = spec.by_epoch;
  r.begin = spec.begin;
  r.end = spec.end;
  r.arg = spec.arg;
  r.milestones = spec.milestones;
  const std::map<std::string, std::map<std::string, double>> defaults = {
      {"LinearLR", {{"start_factor", 1.0 / 3}, {"end_factor", 1.0}}},
      {"ConstantLR", {{"factor", 1.0 / 3}}},
      {"StepLR", {{"gamma", 0.1}}},
      {"MultiStepLR", {{"gamma", 0.1}}},
      {"ExponentialLR", {}},
      {"CosineAnnealingLR", {}},
      {"PolyLR", {{"eta_min", 0.0}, {"power", 1.0}}},
  };
  for (const auto& [key, value] : defaults.at(spec.type)) r.arg.emplace(key, value);
  const bool has_t_max = r.arg.count("T_max") > 0;
  if (spec.convert_to_iter_based) {
    const double n = static_cast<double>(iters_per_epoch);
    r.by_epoch = false;
    r.begin *= n;
    if (r.end != kInf) r.end *= n;
    if (r.type == "StepLR") r.arg["step_size"] *= n;
    for (double& m : r.milestones) m *= n;
    if (has_t_max) r.arg["T_max"] *= n;
  }
  if (r.type == "CosineAnnealingLR") {
    if (!has_t_max) r.arg["T_max"] = r.end - r.begin;
    if (!r.arg.count("eta_min") && !r.arg.count("eta_min_ratio")) r.arg["eta_min"] = 0;
  }
  return r;
}

// The lr of each group used in each iteration, MMEngine's runner style:
// schedulers built in list order (each steps once), then after every iteration
// the iteration-based ones step, after every epoch the epoch-based ones.
std::vector<std::vector<double>> reference_curve(const std::vector<Spec>& specs,
                                                 std::vector<double> lrs, int64_t epochs,
                                                 int64_t iters_per_epoch) {
  const std::vector<double> initial_lrs = lrs;  // group['initial_lr'], shared by all
  std::vector<RefScheduler> schedulers;
  for (const Spec& spec : specs) {
    schedulers.push_back(reference_of(spec, iters_per_epoch));
    schedulers.back().base_values = initial_lrs;
    schedulers.back().step(lrs);  // the constructor's step
  }
  std::vector<std::vector<double>> curve;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    for (int64_t i = 0; i < iters_per_epoch; ++i) {
      curve.push_back(lrs);
      for (auto& s : schedulers) {
        if (!s.by_epoch) s.step(lrs);
      }
    }
    for (auto& s : schedulers) {
      if (s.by_epoch) s.step(lrs);
    }
  }
  return curve;
}

// Two param groups with different base lrs (0.1 and 0.02: bias_lr_mult 0.2).
struct TwoGroups {
  TwoGroups()
      : job("optim_wrapper:\n  optimizer: {type: SGD, lr: 0.1}\n  paramwise_cfg: {bias_lr_mult: "
            "0.2}\n"),
        params{{"fc.weight", leaf(wave({2, 2}, 0)), false}, {"fc.bias", leaf(wave({2}, 1)), false}},
        optim(job.at("optim_wrapper"), params) {}
  Job job;
  std::vector<OptimParam> params;
  OptimWrapper optim;
};

// Within 1e-12 relative: both in double (u_d = 2^-53). MMEngine's chained
// form multiplies up to ~100 per-step factors (~100 u_d = 1.1e-14), the
// product form a few factors and one cos or pow (libm: <= 1 ulp, whatever
// FMA variant glibc picks for the CPU); a cosine step's factor
// (1 + cos(πt/T)) / (1 + cos(π(t-1)/T)) is conditioned by <= 2T²/π² ~ 280
// for T <= 37: ~3e-14 at worst, 30x under.
::testing::AssertionResult close(double got, double want) {
  const double scale = std::max(std::abs(want), 1e-300);
  if (std::abs(got - want) <= 1e-12 * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "got " << got << ", MMEngine gives " << want << " (relative error "
         << std::abs(got - want) / scale << ")";
}

void expect_matches_mmengine(const std::vector<Spec>& specs, int64_t epochs,
                             int64_t iters_per_epoch) {
  TwoGroups model;
  Job job(yaml_of(specs));
  SCOPED_TRACE(yaml_of(specs));
  ParamSchedulers schedulers(&job.at("param_scheduler"), model.optim, iters_per_epoch);
  const auto want = reference_curve(specs, model.optim.base_lrs(), epochs, iters_per_epoch);
  bool varies = false;
  for (int64_t it = 0; it < epochs * iters_per_epoch; ++it) {
    const auto got = schedulers.lrs_at(it, it / iters_per_epoch);
    const auto& ref = want[static_cast<size_t>(it)];
    ASSERT_EQ(got.size(), ref.size());
    for (size_t g = 0; g < got.size(); ++g) {
      EXPECT_TRUE(close(got[g], ref[g])) << "iteration " << it << ", group " << g;
      varies = varies || got[g] != model.optim.base_lrs()[g];
    }
  }
  EXPECT_TRUE(varies) << "the schedule never changed the lr";
}

Spec spec(std::string type, bool by_epoch, double begin, double end,
          std::map<std::string, double> arg = {}, std::vector<double> milestones = {}) {
  Spec s;
  s.type = std::move(type);
  s.by_epoch = by_epoch;
  s.begin = begin;
  s.end = end;
  s.arg = std::move(arg);
  s.milestones = std::move(milestones);
  return s;
}

Spec converted(Spec s) {
  s.convert_to_iter_based = true;
  return s;
}

// --- each type alone ----------------------------------------------------------

TEST(ParamSchedulerTest, LinearLR) {
  expect_matches_mmengine({spec("LinearLR", false, 0, 5, {{"start_factor", 0.1}})}, 2, 6);
  expect_matches_mmengine({spec("LinearLR", false, 3, 10)}, 2, 7);  // defaults 1/3 -> 1
  expect_matches_mmengine(
      {spec("LinearLR", true, 1, 6, {{"start_factor", 1.0}, {"end_factor", 0.25}})}, 8, 3);
}

TEST(ParamSchedulerTest, ConstantLR) {
  expect_matches_mmengine({spec("ConstantLR", false, 0, 4, {{"factor", 0.5}})}, 2, 5);
  expect_matches_mmengine({spec("ConstantLR", true, 2, 5)}, 7, 2);
  expect_matches_mmengine({spec("ConstantLR", false, 1, kInf, {{"factor", 0.25}})}, 2, 5);
}

TEST(ParamSchedulerTest, StepLR) {
  expect_matches_mmengine({spec("StepLR", true, 0, kInf, {{"step_size", 2}})}, 9, 2);
  expect_matches_mmengine({spec("StepLR", true, 1, 7, {{"step_size", 2}, {"gamma", 0.5}})}, 10, 2);
  expect_matches_mmengine({spec("StepLR", false, 0, kInf, {{"step_size", 3}, {"gamma", 0.7}})}, 2,
                          10);
}

TEST(ParamSchedulerTest, MultiStepLR) {
  expect_matches_mmengine({spec("MultiStepLR", true, 0, kInf, {}, {3, 6})}, 9, 2);
  // Milestones count from begin; a repeated milestone applies gamma twice.
  expect_matches_mmengine({spec("MultiStepLR", true, 1, kInf, {{"gamma", 0.5}}, {0, 2, 5, 5})}, 9,
                          2);
  expect_matches_mmengine({spec("MultiStepLR", false, 2, 12, {{"gamma", 0.3}}, {4, 8, 20})}, 2, 9);
}

TEST(ParamSchedulerTest, ExponentialLR) {
  expect_matches_mmengine({spec("ExponentialLR", false, 2, 20, {{"gamma", 0.9}})}, 3, 9);
  expect_matches_mmengine({spec("ExponentialLR", true, 0, kInf, {{"gamma", 0.95}})}, 12, 1);
}

TEST(ParamSchedulerTest, CosineAnnealingLR) {
  expect_matches_mmengine({spec("CosineAnnealingLR", true, 0, 10, {{"eta_min", 0.001}})}, 12, 2);
  expect_matches_mmengine({spec("CosineAnnealingLR", false, 3, 40, {{"eta_min_ratio", 0.1}})}, 5,
                          9);
  // T_max shorter than the window: the cosine comes back up (periodic).
  expect_matches_mmengine({spec("CosineAnnealingLR", true, 0, 13, {{"T_max", 4}})}, 14, 1);
}

TEST(ParamSchedulerTest, PolyLR) {
  expect_matches_mmengine({spec("PolyLR", false, 0, 30, {{"eta_min", 1e-4}, {"power", 2.0}})}, 4,
                          9);
  expect_matches_mmengine({spec("PolyLR", true, 1, 8)}, 10, 1);
}

// --- chains -------------------------------------------------------------------

TEST(ParamSchedulerTest, WarmupThenCosineByEpoch) {
  expect_matches_mmengine({spec("LinearLR", false, 0, 5, {{"start_factor", 0.001}}),
                           spec("CosineAnnealingLR", true, 0, 10, {{"eta_min", 1e-5}})},
                          12, 7);
  expect_matches_mmengine({spec("LinearLR", false, 0, 5, {{"start_factor", 0.01}}),
                           spec("CosineAnnealingLR", true, 1, 10, {{"eta_min_ratio", 0.05}})},
                          12, 6);
}

TEST(ParamSchedulerTest, WarmupThenMultiStep) {
  expect_matches_mmengine({spec("LinearLR", false, 0, 5, {{"start_factor", 0.001}}),
                           spec("MultiStepLR", true, 0, 12, {}, {3, 6})},
                          12, 4);
}

TEST(ParamSchedulerTest, WarmupThenStep) {
  expect_matches_mmengine({spec("LinearLR", false, 0, 5, {{"start_factor", 0.1}}),
                           spec("StepLR", true, 0, kInf, {{"step_size", 2}, {"gamma", 0.5}})},
                          9, 4);
}

TEST(ParamSchedulerTest, OverlappingMultiplicativeSchedulersMultiply) {
  // A warm-up spanning several epochs under an epoch-based decay: both
  // multiplicative, so the product is MMEngine's chain exactly.
  expect_matches_mmengine({spec("LinearLR", false, 0, 20, {{"start_factor", 0.2}}),
                           spec("ExponentialLR", true, 0, kInf, {{"gamma", 0.8}}),
                           spec("ConstantLR", false, 3, 9, {{"factor", 0.5}})},
                          8, 5);
  // Cosine with eta_min 0 is multiplicative too.
  expect_matches_mmengine({spec("LinearLR", false, 0, 20, {{"start_factor", 0.2}}),
                           spec("CosineAnnealingLR", true, 0, 8)},
                          8, 5);
}

TEST(ParamSchedulerTest, ConvertToIterBased) {
  // mmpretrain's usual: a one-epoch warm-up, then cosine, both per iteration.
  expect_matches_mmengine({converted(spec("LinearLR", true, 0, 1, {{"start_factor", 0.001}})),
                           converted(spec("CosineAnnealingLR", true, 1, 10, {{"eta_min", 1e-5}}))},
                          10, 7);
  // Overlapping, eta_min 0: multiplicative, so exact.
  expect_matches_mmengine({spec("LinearLR", false, 0, 5, {{"start_factor", 0.001}}),
                           converted(spec("CosineAnnealingLR", true, 0, 10))},
                          10, 7);
  expect_matches_mmengine({converted(spec("MultiStepLR", true, 1, kInf, {}, {2, 4}))}, 7, 5);
  expect_matches_mmengine(
      {converted(spec("StepLR", true, 0, 8, {{"step_size", 3}, {"gamma", 0.5}}))}, 9, 4);
  expect_matches_mmengine({converted(spec("CosineAnnealingLR", true, 0, 9, {{"T_max", 3}}))}, 9, 4);
  expect_matches_mmengine({converted(spec("PolyLR", true, 1, 6, {{"power", 0.5}}))}, 7, 3);

  // And it is the same schedule as writing it in iterations.
  TwoGroups a, b;
  Job by_epoch(yaml_of({converted(spec("CosineAnnealingLR", true, 1, 6, {{"eta_min", 1e-4}}))}));
  Job by_iter(yaml_of({spec("CosineAnnealingLR", false, 4, 24, {{"eta_min", 1e-4}})}));
  ParamSchedulers converted_sched(&by_epoch.at("param_scheduler"), a.optim, 4);
  ParamSchedulers iter_sched(&by_iter.at("param_scheduler"), b.optim, 4);
  for (int64_t it = 0; it < 30; ++it) {
    EXPECT_EQ(converted_sched.lrs_at(it, 0), iter_sched.lrs_at(it, 0)) << it;
  }
}

TEST(ParamSchedulerTest, AffineSchedulerUnderAWarmupDiffersFromMMEngineByLittle) {
  // The documented limit of the product form: MMEngine's cosine steps lr to
  // eta + c (lr - eta), which does not commute with the warm-up's products
  // while both act in the same iterations. The gap is bounded by eta_min/base
  // times the cosine's movement during the warm-up.
  const std::vector<Spec> specs = {
      spec("LinearLR", false, 0, 5, {{"start_factor", 0.001}}),
      converted(spec("CosineAnnealingLR", true, 0, 10, {{"eta_min", 1e-5}}))};
  TwoGroups model;
  Job job(yaml_of(specs));
  ParamSchedulers schedulers(&job.at("param_scheduler"), model.optim, 7);
  const auto want = reference_curve(specs, model.optim.base_lrs(), 10, 7);
  double worst = 0;
  for (int64_t it = 0; it < 70; ++it) {
    const auto got = schedulers.lrs_at(it, it / 7);
    for (size_t g = 0; g < got.size(); ++g) {
      const double ref = want[static_cast<size_t>(it)][g];
      worst = std::max(worst, std::abs(got[g] - ref) / ref);
    }
  }
  EXPECT_GT(worst, 1e-12);
  EXPECT_LT(worst, 1e-5);
}

// --- closed-form values, the runner interface -------------------------------------

TEST(ParamSchedulerTest, BeforeBeginAndAfterEnd) {
  TwoGroups model;
  Job job(yaml_of({spec("LinearLR", false, 3, 7, {{"start_factor", 0.5}, {"end_factor", 0.9}})}));
  ParamSchedulers schedulers(&job.at("param_scheduler"), model.optim, 1);
  const double base = 0.1;
  // DOUBLE_EQ (4 ulp): each value is base times one factor, rounded once.
  EXPECT_DOUBLE_EQ(schedulers.lrs_at(0, 0)[0], base);  // before begin: untouched
  EXPECT_DOUBLE_EQ(schedulers.lrs_at(2, 0)[0], base);
  EXPECT_DOUBLE_EQ(schedulers.lrs_at(3, 0)[0], base * 0.5);    // begin: start_factor
  EXPECT_DOUBLE_EQ(schedulers.lrs_at(6, 0)[0], base * 0.9);    // end - 1: end_factor
  EXPECT_DOUBLE_EQ(schedulers.lrs_at(100, 0)[0], base * 0.9);  // held after end
}

TEST(ParamSchedulerTest, ApplySetsTheOptimizerLrsFromScaledBaseLrs) {
  TwoGroups model;
  model.optim.scale_lr(2.0);  // auto_scale_lr, before the schedulers
  Job job(yaml_of({spec("StepLR", true, 0, kInf, {{"step_size", 1}, {"gamma", 0.5}})}));
  ParamSchedulers schedulers(&job.at("param_scheduler"), model.optim, 10);
  schedulers.apply(0, 0);
  EXPECT_EQ(model.optim.lrs(), (std::vector<double>{0.2, 0.2 * 0.2}));
  schedulers.apply(25, 2);
  EXPECT_EQ(model.optim.lrs(), (std::vector<double>{0.05, 0.2 * 0.2 * 0.25}));

  ParamSchedulers none(nullptr, model.optim, 10);  // no param_scheduler: constant
  none.apply(100, 10);
  EXPECT_EQ(model.optim.lrs(), model.optim.base_lrs());
}

TEST(ParamSchedulerTest, EndDefaultsToTheTrainingLength) {
  // MMEngine's runner: max_epochs for by_epoch schedulers, max_iters for the
  // others, before convert_to_iter_based.
  const TrainLength length{6, 6 * 5};
  Job implicit(R"(
param_scheduler:
  - {type: LinearLR, start_factor: 0.5, by_epoch: false}
  - {type: CosineAnnealingLR, begin: 1, eta_min: 0.001}
  - {type: ConstantLR, factor: 0.5, begin: 2, convert_to_iter_based: true}
)");
  Job explicit_ends(R"(
param_scheduler:
  - {type: LinearLR, start_factor: 0.5, by_epoch: false, end: 30}
  - {type: CosineAnnealingLR, begin: 1, end: 6, eta_min: 0.001}
  - {type: ConstantLR, factor: 0.5, by_epoch: false, begin: 10, end: 30}
)");
  TwoGroups a, b;
  ParamSchedulers defaulted(&implicit.at("param_scheduler"), a.optim, 5, length);
  ParamSchedulers written(&explicit_ends.at("param_scheduler"), b.optim, 5);
  for (int64_t it = 0; it < 35; ++it) {
    EXPECT_EQ(defaulted.lrs_at(it, it / 5), written.lrs_at(it, it / 5)) << it;
  }
  // So ConstantLR without end restores the lr in the last epoch, as in MMEngine.
  TwoGroups d;
  Job constant("param_scheduler: {type: ConstantLR, factor: 0.5}\n");
  ParamSchedulers constant_sched(&constant.at("param_scheduler"), d.optim, 5, length);
  // DOUBLE_EQ (4 ulp): 0.1 x 0.5 and 0.1 x 1, each one rounding.
  EXPECT_DOUBLE_EQ(constant_sched.lrs_at(0, 4)[0], 0.05);
  EXPECT_DOUBLE_EQ(constant_sched.lrs_at(0, 5)[0], 0.1);

  TwoGroups c;
  Job late("param_scheduler: {type: StepLR, step_size: 1, begin: 6}\n");
  try {
    ParamSchedulers schedulers(&late.at("param_scheduler"), c.optim, 5, length);
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "job.yaml:1:18: param_scheduler: end defaults to the training length (6 "
                 "epochs), which is not after begin (6); write end");
  }
}

std::string construction_error(const std::string& yaml, int64_t iters_per_epoch = 1) {
  TwoGroups model;
  Job job(yaml);
  try {
    ParamSchedulers schedulers(&job.at("param_scheduler"), model.optim, iters_per_epoch);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

TEST(ParamSchedulerTest, ConstructionRejectsBadConfigs) {
  EXPECT_EQ(construction_error("param_scheduler: {type: CosineAnnealingLR}\n"),
            "job.yaml:1:18: param_scheduler: CosineAnnealingLR needs T_max or end (T_max "
            "defaults to end - begin); write it, in epochs");
  EXPECT_EQ(construction_error("param_scheduler:\n  - {type: LinearLR, by_epoch: false}\n"),
            "job.yaml:2:5: param_scheduler.0: LinearLR needs end (its schedule runs from begin to "
            "end - 1); write it, in iterations");
  EXPECT_EQ(construction_error("param_scheduler: {type: StepLR, step_size: 0}\n"),
            "job.yaml:1:44: param_scheduler.step_size: must be >= 1, got 0");
  EXPECT_EQ(
      construction_error("param_scheduler: {type: StepLR, step_size: 2, convert_to_iter_based: "
                         "true}\n",
                         0),
      "job.yaml:1:70: param_scheduler.convert_to_iter_based: needs the number of iterations per "
      "epoch, got 0");
}

}  // namespace
}  // namespace rh::optim
