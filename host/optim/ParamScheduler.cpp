#include "optim/ParamScheduler.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>

#include "config/ConfigNode.hpp"
#include "optim/OptimSchema.hpp"
#include "optim/OptimWrapper.hpp"

namespace rh::optim {
namespace {

using config::Node;

enum class SchedulerKind { Linear, Constant, Step, MultiStep, Exponential, Cosine, Poly };

constexpr double kPi = 3.14159265358979323846;

struct Scheduler {
  SchedulerKind kind = SchedulerKind::Constant;
  bool by_epoch = true;
  int64_t begin = 0;
  std::optional<int64_t> end;  // nullopt: never ends
  // Type parameters, MMEngine's names and defaults.
  double start_factor = 1.0 / 3, end_factor = 1.0;  // LinearLR
  double factor = 1.0 / 3;                          // ConstantLR
  double gamma = 0.1;                               // StepLR, MultiStepLR, ExponentialLR
  int64_t step_size = 1;                            // StepLR
  std::vector<int64_t> milestones;                  // MultiStepLR
  int64_t t_max = 0;                                // CosineAnnealingLR
  double eta_min = 0;                               // CosineAnnealingLR, PolyLR
  std::optional<double> eta_min_ratio;              // CosineAnnealingLR
  double power = 1.0;                               // PolyLR

  // MMEngine's total_iters: the step (counted from begin) of the last update.
  int64_t last_step() const { return *end - begin - 1; }

  // The lr this scheduler alone would give at `t` steps past begin, as a
  // multiple of `base` (eta_min is absolute, so the factor depends on base).
  double factor_at(int64_t t, double base) const {
    switch (kind) {
      case SchedulerKind::Linear: {
        const int64_t total = last_step();
        if (total == 0) return start_factor;  // one step: MMEngine never leaves start_factor
        return start_factor + (end_factor - start_factor) *
                                  static_cast<double>(std::min(t, total)) /
                                  static_cast<double>(total);
      }
      case SchedulerKind::Constant: {
        const bool restored = end && last_step() > 0 && t >= last_step();
        return restored ? 1.0 : factor;
      }
      case SchedulerKind::Step:
        return std::pow(gamma, static_cast<double>(t / step_size));
      case SchedulerKind::MultiStep: {
        const auto passed =
            std::count_if(milestones.begin(), milestones.end(), [t](int64_t m) { return m <= t; });
        return std::pow(gamma, static_cast<double>(passed));
      }
      case SchedulerKind::Exponential:
        return std::pow(gamma, static_cast<double>(t));
      case SchedulerKind::Cosine: {
        if (base == 0) return 1.0;
        const double eta = eta_min_ratio ? base * *eta_min_ratio : eta_min;
        const double cosine = (1 + std::cos(kPi * static_cast<double>(t) / t_max)) / 2;
        return (eta + (base - eta) * cosine) / base;
      }
      case SchedulerKind::Poly: {
        const int64_t total = last_step();
        if (base == 0 || total == 0) return 1.0;
        const double left = 1 - static_cast<double>(std::min(t, total)) / total;
        return (eta_min + (base - eta_min) * std::pow(left, power)) / base;
      }
    }
    return 1.0;
  }

  // Factor after `global` steps of its own counter (iterations or epochs).
  double factor_after(int64_t global, double base) const {
    if (global < begin) return 1.0;
    const int64_t last = end ? std::min(global, *end - 1) : global;
    return factor_at(last - begin, base);
  }
};

double number_or(const Node& map, const std::string& key, double fallback) {
  const Node* value = map.find(key);
  return value != nullptr ? value->as_double() : fallback;
}

Scheduler read_scheduler(const Node& cfg, int64_t iters_per_epoch, const TrainLength& length) {
  static const std::vector<std::pair<std::string, SchedulerKind>> kKinds = {
      {"LinearLR", SchedulerKind::Linear},
      {"ConstantLR", SchedulerKind::Constant},
      {"StepLR", SchedulerKind::Step},
      {"MultiStepLR", SchedulerKind::MultiStep},
      {"ExponentialLR", SchedulerKind::Exponential},
      {"CosineAnnealingLR", SchedulerKind::Cosine},
      {"PolyLR", SchedulerKind::Poly}};
  Scheduler s;
  const std::string type = cfg.find("type")->scalar();
  for (const auto& [name, kind] : kKinds) {
    if (name == type) s.kind = kind;
  }
  if (const Node* by_epoch = cfg.find("by_epoch")) s.by_epoch = by_epoch->as_bool();
  if (const Node* begin = cfg.find("begin")) s.begin = begin->as_int();
  if (const Node* end = cfg.find("end")) {
    s.end = end->as_int();
  } else if (const int64_t train = s.by_epoch ? length.max_epochs : length.max_iters; train > 0) {
    // MMEngine's runner: the training's length, in the scheduler's own unit.
    if (train <= s.begin) {
      throw config::ConfigError(cfg.location(), cfg.path(),
                                "end defaults to the training length (" + std::to_string(train) +
                                    (s.by_epoch ? " epochs" : " iterations") +
                                    "), which is not after begin (" + std::to_string(s.begin) +
                                    "); write end");
    }
    s.end = train;
  }
  s.start_factor = number_or(cfg, "start_factor", s.start_factor);
  s.end_factor = number_or(cfg, "end_factor", s.end_factor);
  s.factor = number_or(cfg, "factor", s.factor);
  s.gamma = number_or(cfg, "gamma", s.gamma);
  if (const Node* step_size = cfg.find("step_size")) s.step_size = step_size->as_int();
  if (const Node* milestones = cfg.find("milestones")) {
    for (const auto& m : milestones->seq_items()) s.milestones.push_back(m->as_int());
  }
  s.eta_min = number_or(cfg, "eta_min", 0.0);
  if (const Node* ratio = cfg.find("eta_min_ratio")) s.eta_min_ratio = ratio->as_double();
  s.power = number_or(cfg, "power", s.power);
  const Node* t_max = cfg.find("T_max");

  const bool needs_end = s.kind == SchedulerKind::Linear || s.kind == SchedulerKind::Poly ||
                         (s.kind == SchedulerKind::Cosine && t_max == nullptr);
  if (needs_end && !s.end) {
    throw config::ConfigError(cfg.location(), cfg.path(),
                              type +
                                  (s.kind == SchedulerKind::Cosine
                                       ? " needs T_max or end (T_max defaults to end - begin)"
                                       : " needs end (its schedule runs from begin to end - 1)") +
                                  "; write it, in " + (s.by_epoch ? "epochs" : "iterations"));
  }

  const Node* convert = cfg.find("convert_to_iter_based");
  if (convert != nullptr && convert->as_bool()) {
    // MMEngine's build_iter_from_epoch: epochs -> iterations.
    if (iters_per_epoch < 1) {
      throw config::ConfigError(
          convert->location(), convert->path(),
          "needs the number of iterations per epoch, got " + std::to_string(iters_per_epoch));
    }
    s.by_epoch = false;
    s.begin *= iters_per_epoch;
    if (s.end) *s.end *= iters_per_epoch;
    s.step_size *= iters_per_epoch;
    for (int64_t& m : s.milestones) m *= iters_per_epoch;
    s.t_max = t_max != nullptr ? t_max->as_int() * iters_per_epoch : 0;
  } else {
    s.t_max = t_max != nullptr ? t_max->as_int() : 0;
  }
  if (s.kind == SchedulerKind::Cosine && t_max == nullptr) s.t_max = *s.end - s.begin;
  return s;
}

}  // namespace

struct ParamSchedulers::Impl {
  std::vector<Scheduler> schedulers;  // list order
};

ParamSchedulers::ParamSchedulers(const config::Node* cfg, OptimWrapper& optim,
                                 int64_t iters_per_epoch, TrainLength length)
    : impl_(std::make_unique<Impl>()), optim_(optim) {
  if (cfg == nullptr || cfg->is_null()) return;
  if (auto errors = config::validate(*cfg, param_scheduler_schema()); !errors.empty()) {
    throw errors.front();
  }
  if (auto errors = check_param_scheduler(*cfg); !errors.empty()) throw errors.front();
  if (cfg->is_map()) {
    impl_->schedulers.push_back(read_scheduler(*cfg, iters_per_epoch, length));
  } else {
    for (const auto& item : cfg->seq_items()) {
      impl_->schedulers.push_back(read_scheduler(*item, iters_per_epoch, length));
    }
  }
}

ParamSchedulers::~ParamSchedulers() = default;

std::vector<double> ParamSchedulers::lrs_at(int64_t iters_done, int64_t epochs_done) const {
  std::vector<double> lrs = optim_.base_lrs();
  for (double& lr : lrs) {
    const double base = lr;
    for (const Scheduler& s : impl_->schedulers) {
      lr *= s.factor_after(s.by_epoch ? epochs_done : iters_done, base);
    }
  }
  return lrs;
}

void ParamSchedulers::apply(int64_t iters_done, int64_t epochs_done) {
  optim_.set_lrs(lrs_at(iters_done, epochs_done));
}

}  // namespace rh::optim
