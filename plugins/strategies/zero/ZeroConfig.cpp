#include "ZeroConfig.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "JsonReader.hpp"

namespace rh::zero {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail_text(const std::string& where, const std::string& message) {
  throw rh::Exception(RH_ERROR_INVALID_CONFIG, where + ": " + message);
}

const char kAutoHint[] =
    " ('auto' is a placeholder Hugging Face's Trainer fills in; DeepSpeed itself does not "
    "accept it: write the value)";

// One node of either source, as the validator reads it.
class View {
 public:
  virtual ~View() = default;
  virtual bool is_null() const = 0;
  virtual bool is_map() const = 0;
  virtual std::vector<std::string> keys() const = 0;
  // The child at `key` (which keys() listed).
  virtual std::unique_ptr<View> child(const std::string& key) const = 0;
  // Where the key itself was written, for errors about the key.
  virtual std::string key_where(const std::string& key) const { return child(key)->where(); }
  virtual bool as_bool() const = 0;
  virtual double as_number() const = 0;
  virtual std::string as_string() const = 0;
  // "file:line:col: key.path"
  virtual std::string where() const = 0;
  // True for the JSON file (changes how unknown keys are phrased).
  virtual bool from_file() const = 0;

  [[noreturn]] void fail(const std::string& message) const { fail_text(where(), message); }
};

// The job's YAML through the host: type errors come from the host, located.
class ConfigView : public View {
 public:
  explicit ConfigView(rh::Config c) : c_(c) {}
  bool is_null() const override { return c_.kind() == RH_CONFIG_NULL; }
  bool is_map() const override { return c_.kind() == RH_CONFIG_MAP; }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < c_.size(); ++i) out.push_back(c_.key_at(i));
    return out;
  }
  std::unique_ptr<View> child(const std::string& key) const override {
    return std::make_unique<ConfigView>(c_.child(key));
  }
  bool as_bool() const override {
    reject_auto("a boolean");
    return c_.as<bool>();
  }
  double as_number() const override {
    reject_auto("a number");
    return c_.as<double>();
  }
  std::string as_string() const override { return c_.as<std::string>(); }
  std::string where() const override { return c_.location() + ": " + c_.path(); }
  bool from_file() const override { return false; }

 private:
  void reject_auto(const char* expected) const {
    if (c_.kind() == RH_CONFIG_SCALAR && c_.as<std::string>() == "auto")
      fail(std::string("expected ") + expected + ", got 'auto'" + kAutoHint);
  }
  rh::Config c_;
};

class JsonView : public View {
 public:
  JsonView(const JsonValue& v, std::string file, std::string path)
      : v_(v), file_(std::move(file)), path_(std::move(path)) {}
  bool is_null() const override { return v_.kind == JsonValue::Kind::Null; }
  bool is_map() const override { return v_.kind == JsonValue::Kind::Object; }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (const auto& m : v_.members) out.push_back(m.key);
    return out;
  }
  std::unique_ptr<View> child(const std::string& key) const override {
    return std::make_unique<JsonView>(*v_.find(key), file_, child_path(key));
  }
  std::string key_where(const std::string& key) const override {
    for (const auto& m : v_.members)
      if (m.key == key) return position(m.line, m.column) + ": " + child_path(key);
    return where();
  }
  bool as_bool() const override {
    if (v_.kind != JsonValue::Kind::Bool) type_error("a boolean");
    return v_.boolean;
  }
  double as_number() const override {
    if (v_.kind != JsonValue::Kind::Number) type_error("a number");
    return std::strtod(v_.text.c_str(), nullptr);
  }
  std::string as_string() const override {
    if (v_.kind != JsonValue::Kind::String) type_error("a string");
    return v_.text;
  }
  std::string where() const override { return position(v_.line, v_.column) + ": " + path_; }
  bool from_file() const override { return true; }

 private:
  std::string child_path(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  std::string position(int line, int column) const {
    return file_ + ":" + std::to_string(line) + ":" + std::to_string(column);
  }
  [[noreturn]] void type_error(const char* expected) const {
    std::string got = v_.kind_name();
    if (v_.kind == JsonValue::Kind::String) got += " \"" + v_.text + "\"";
    if (v_.kind == JsonValue::Kind::Number) got += " " + v_.text;
    if (v_.kind == JsonValue::Kind::Bool) got += v_.boolean ? " true" : " false";
    fail(std::string("expected ") + expected + ", got " + got +
         (v_.kind == JsonValue::Kind::String && v_.text == "auto" ? kAutoHint : ""));
  }
  const JsonValue& v_;
  std::string file_;
  std::string path_;
};

// ---- key tables -------------------------------------------------------------

// DeepSpeed keys that are job keys in runner-host.
const std::map<std::string, std::string>& job_keys() {
  static const std::map<std::string, std::string> keys = {
      {"train_micro_batch_size_per_gpu", "data.train.batch_size (the batch of one rank)"},
      {"train_batch_size",
       "data.train.batch_size (per rank; the global batch is batch_size x world size x "
       "optim_wrapper.accumulative_counts)"},
      {"gradient_accumulation_steps", "optim_wrapper.accumulative_counts"},
      {"optimizer", "optim_wrapper.optimizer"},
      {"scheduler", "param_scheduler"},
  };
  return keys;
}

// DeepSpeed keys runner-host knows and does not implement, per section, with
// a hint where there is something to say.
using HintTable = std::map<std::string, std::string>;

const HintTable& unimplemented_zero_keys() {
  static const HintTable keys = {
      {"offload_optimizer", ""},
      {"offload_param", ""},
      {"cpu_offload", ""},
      {"cpu_offload_param", ""},
      {"cpu_offload_use_pin_memory", ""},
      {"sub_group_size", ""},
      {"zero_hpz_partition_size", " (ZeRO++)"},
      {"zero_quantized_weights", " (ZeRO++)"},
      {"zero_quantized_nontrainable_weights", " (ZeRO++)"},
      {"zero_quantized_gradients", " (ZeRO++)"},
      {"zeropp_loco_param", " (ZeRO++)"},
      {"mics_shard_size", " (MiCS)"},
      {"mics_hierarchical_params_gather", " (MiCS)"},
      {"stage3_model_persistence_threshold", ""},
      {"stage3_max_reuse_distance", ""},
      {"stage3_gather_16bit_weights_on_model_save",
       " (runner-host's checkpoints always hold the full weights)"},
      {"stage3_gather_fp16_weights_on_model_save",
       " (runner-host's checkpoints always hold the full weights)"},
      {"stage3_module_granularity_threshold", ""},
      {"stage3_use_all_reduce_for_fetch_params", ""},
      {"allgather_partitions", ""},
      {"use_multi_rank_bucket_allreduce", ""},
      {"load_from_fp32_weights", ""},
      {"elastic_checkpoint", ""},
      {"ignore_unused_parameters", ""},
      {"legacy_stage1", ""},
      {"round_robin_gradients", ""},
      {"memory_efficient_linear", ""},
      {"pipeline_loading_checkpoint", ""},
      {"override_module_apply", ""},
      {"prefetch_bucket_size", " (write stage3_prefetch_bucket_size)"},
      {"param_persistence_threshold", " (write stage3_param_persistence_threshold)"},
      {"max_live_parameters", " (write stage3_max_live_parameters)"},
  };
  return keys;
}

const HintTable& unimplemented_fp16_keys() {
  static const HintTable keys = {
      {"auto_cast", " (set strategy.inputs_to_half: true)"},
      {"fp16_master_weights_and_grads", " (the master weights are always fp32)"},
      {"raise_error_at_min_scale", " (an overflow at min_loss_scale always stops the run)"},
  };
  return keys;
}

const HintTable& unimplemented_bf16_keys() {
  static const HintTable keys = {{"immediate_grad_update", ""}, {"check_grad_overflow", ""}};
  return keys;
}

const HintTable& unimplemented_top_keys() {
  static const HintTable keys = {
      {"bfloat16", " (its old name for bf16: write bf16)"},
      {"amp", " (use fp16 or bf16)"},
      {"zero_allow_untested_optimizer", ""},
      {"zero_force_ds_cpu_optimizer", ""},
      {"communication_data_type", ""},
      {"prescale_gradients", ""},
      {"gradient_predivide_factor", ""},
      {"fp32_allreduce", ""},
      {"sparse_gradients", ""},
      {"steps_per_print", " (the logger hook's interval does this)"},
      {"wall_clock_breakdown", ""},
      {"memory_breakdown", ""},
      {"dump_state", ""},
      {"activation_checkpointing", ""},
      {"flops_profiler", ""},
      {"tensorboard", ""},
      {"wandb", ""},
      {"csv_monitor", ""},
      {"comms_logger", ""},
      {"aio", ""},
      {"elasticity", ""},
      {"pipeline", ""},
      {"checkpoint", " (checkpoints are the job's hooks and checkpoint_io)"},
      {"data_efficiency", ""},
      {"curriculum_learning", ""},
      {"compression_training", ""},
      {"autotuning", ""},
      {"sparse_attention", ""},
      {"progressive_layer_drop", ""},
  };
  return keys;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1 : 0)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// ---- the validator ----------------------------------------------------------

template <class T>
struct Field {
  std::optional<T> value;
  std::string where;  // of the value that was kept (the last one set)
};

struct Draft {
  std::string section_where;  // of the strategy map / the file, for "missing" errors
  Field<int64_t> stage;
  Field<int64_t> reduce_bucket_size, allgather_bucket_size;
  Field<bool> overlap_comm, contiguous_gradients, reduce_scatter;
  Field<int64_t> prefetch, persistence, max_live;
  Field<bool> fp16_enabled;
  Field<double> loss_scale;
  Field<int64_t> initial_scale_power, loss_scale_window, hysteresis;
  Field<bool> consecutive_hysteresis;
  Field<double> min_loss_scale;
  Field<bool> bf16_enabled;
  Field<bool> inputs_to_half;
  Field<double> gradient_clipping;
};

// An integral number (5e8 and 2.0 included, as DeepSpeed's Python accepts
// them), within [min, 2^53].
int64_t integer(const View& v, int64_t min, const std::string& what_min) {
  const double d = v.as_number();
  constexpr double kMaxExact = 9007199254740992.0;  // 2^53: every integer below is exact
  if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > kMaxExact) {
    std::ostringstream text;
    text.precision(17);
    text << d;
    v.fail("expected a whole number, got " + text.str());
  }
  const auto n = static_cast<int64_t>(d);
  if (n < min) v.fail("must be " + what_min + ", got " + std::to_string(n));
  return n;
}

template <class T>
void set(Field<T>& field, const View& v, T value) {
  field.value = value;
  field.where = v.where();
}

class Validator {
 public:
  explicit Validator(Draft& d) : d_(d) {}

  // A top-level map: the strategy map (job) or the file's root object.
  void top(const View& map) {
    if (!map.is_map()) map.fail("expected a map");
    for (const std::string& key : map.keys()) {
      if (!map.from_file() && (key == "type" || key == "plugin" || key == "deepspeed_config"))
        continue;  // the host's keys; deepspeed_config is read first by the caller
      const auto c = map.child(key);
      if (key == "zero_optimization") {
        section(
            *c, [&](const std::string& k, const View& v) { return zero_key(k, v); },
            unimplemented_zero_keys(), zero_keys());
      } else if (key == "fp16") {
        section(
            *c, [&](const std::string& k, const View& v) { return fp16_key(k, v); },
            unimplemented_fp16_keys(), fp16_keys());
      } else if (key == "bf16") {
        section(*c, [&](const std::string& k, const View& v) { return bf16_key(k, v); },
                unimplemented_bf16_keys(), {"enabled"});
      } else if (key == "inputs_to_half") {
        if (!c->is_null()) set(d_.inputs_to_half, *c, c->as_bool());
      } else if (key == "gradient_clipping") {
        if (!c->is_null()) {
          const double g = c->as_number();
          if (!(g >= 0) || !std::isfinite(g))
            c->fail("must be >= 0 (the max global gradient norm; 0 = off), got " +
                    std::to_string(g));
          set(d_.gradient_clipping, *c, g);
        }
      } else {
        unknown(map, key, unimplemented_top_keys(), top_keys());
      }
    }
  }

 private:
  static std::vector<std::string> top_keys() {
    return {"deepspeed_config", "zero_optimization", "fp16", "bf16",
            "inputs_to_half",   "gradient_clipping"};
  }

  // `read` returns false for a key it does not know.
  void section(const View& map, const std::function<bool(const std::string&, const View&)>& read,
               const HintTable& unimplemented, const std::vector<std::string>& supported) {
    if (map.is_null()) return;  // `fp16:` with nothing under it: nothing set
    if (!map.is_map()) map.fail("expected a map");
    for (const std::string& key : map.keys()) {
      // A known key set to null is "not set" (each reader checks).
      if (!read(key, *map.child(key))) unknown(map, key, unimplemented, supported);
    }
  }

  static std::vector<std::string> zero_keys() {
    return {"stage",
            "reduce_bucket_size",
            "allgather_bucket_size",
            "overlap_comm",
            "contiguous_gradients",
            "reduce_scatter",
            "stage3_prefetch_bucket_size",
            "stage3_param_persistence_threshold",
            "stage3_max_live_parameters"};
  }
  static std::vector<std::string> fp16_keys() {
    return {"enabled",    "loss_scale",     "initial_scale_power",   "loss_scale_window",
            "hysteresis", "min_loss_scale", "consecutive_hysteresis"};
  }

  [[noreturn]] void unknown(const View& map, const std::string& key, const HintTable& unimplemented,
                            const std::vector<std::string>& supported) {
    const std::string where = map.key_where(key);
    if (auto j = job_keys().find(key); j != job_keys().end()) {
      fail_text(where, "a DeepSpeed key that is a job key in runner-host: set " + j->second +
                           " in the job instead");
    }
    if (auto u = unimplemented.find(key); u != unimplemented.end()) {
      fail_text(where, "DeepSpeed's " + key + u->second +
                           " is not implemented by runner-host's zero strategy (runner-host never "
                           "ignores a key: remove it)");
    }
    std::string best;
    size_t best_distance = 3;  // suggest only close names
    for (const std::string& s : supported) {
      const size_t dist = edit_distance(key, s);
      if (dist < best_distance) {
        best_distance = dist;
        best = s;
      }
    }
    const std::string what = map.from_file() ? "not a key runner-host's zero strategy reads "
                                               "(a DeepSpeed key it does not implement, or a "
                                               "misspelling)"
                                             : "unknown key for strategy 'zero'";
    if (!best.empty()) fail_text(where, what + " (did you mean '" + best + "'?)");
    fail_text(where, what + " (expected one of: " + join(supported) + ")");
  }

  bool zero_key(const std::string& key, const View& v) {
    const bool null = v.is_null();
    auto size = [&](Field<int64_t>& f, bool positive) {
      if (!null)
        set(f, v,
            positive ? integer(v, 1, "> 0 (elements)")
                     : integer(v, 0, ">= 0 (elements, as DeepSpeed counts them)"));
      return true;
    };
    auto flag = [&](Field<bool>& f) {
      if (!null) set(f, v, v.as_bool());
      return true;
    };
    if (key == "stage") {
      if (null) return true;
      const int64_t stage = integer(v, std::numeric_limits<int64_t>::min(), "");
      if (stage == 0)
        v.fail("must be 1, 2 or 3, got 0 (DeepSpeed's 'ZeRO disabled': use strategy: ddp)");
      if (stage < 1 || stage > 3) v.fail("must be 1, 2 or 3, got " + std::to_string(stage));
      set(d_.stage, v, stage);
      return true;
    }
    if (key == "reduce_bucket_size") return size(d_.reduce_bucket_size, true);
    if (key == "allgather_bucket_size") return size(d_.allgather_bucket_size, true);
    if (key == "stage3_prefetch_bucket_size") return size(d_.prefetch, false);
    if (key == "stage3_param_persistence_threshold") return size(d_.persistence, false);
    if (key == "stage3_max_live_parameters") return size(d_.max_live, false);
    if (key == "overlap_comm") return flag(d_.overlap_comm);
    if (key == "contiguous_gradients") return flag(d_.contiguous_gradients);
    if (key == "reduce_scatter") return flag(d_.reduce_scatter);
    return false;
  }

  bool fp16_key(const std::string& key, const View& v) {
    const bool null = v.is_null();
    if (key == "enabled") {
      if (!null) set(d_.fp16_enabled, v, v.as_bool());
    } else if (key == "loss_scale") {
      if (!null) {
        const double s = v.as_number();
        if (!(s >= 0) || !std::isfinite(s))
          v.fail("must be >= 0 (0 = dynamic loss scaling), got " + std::to_string(s));
        set(d_.loss_scale, v, s);
      }
    } else if (key == "initial_scale_power") {
      if (!null) {
        const int64_t p = integer(v, 0, ">= 0");
        if (p > 127)
          v.fail("must be <= 127 (2^128 is not a finite float), got " + std::to_string(p));
        set(d_.initial_scale_power, v, p);
      }
    } else if (key == "loss_scale_window") {
      if (!null) set(d_.loss_scale_window, v, integer(v, 1, ">= 1 (steps)"));
    } else if (key == "hysteresis") {
      if (!null) {
        const int64_t h = integer(v, 1, ">= 1 (overflows tolerated before the scale halves)");
        if (h > std::numeric_limits<int>::max()) v.fail("is too large: " + std::to_string(h));
        set(d_.hysteresis, v, h);
      }
    } else if (key == "consecutive_hysteresis") {
      if (!null) set(d_.consecutive_hysteresis, v, v.as_bool());
    } else if (key == "min_loss_scale") {
      if (!null) {
        const double m = v.as_number();
        if (!(m > 0) || !std::isfinite(m)) v.fail("must be > 0, got " + std::to_string(m));
        set(d_.min_loss_scale, v, m);
      }
    } else {
      return false;
    }
    return true;
  }

  bool bf16_key(const std::string& key, const View& v) {
    if (key != "enabled") return false;
    if (!v.is_null()) set(d_.bf16_enabled, v, v.as_bool());
    return true;
  }

  Draft& d_;
};

template <class T>
T value_or(const Field<T>& f, T fallback) {
  return f.value ? *f.value : fallback;
}

ZeroConfig finish(const Draft& d) {
  ZeroConfig out;
  if (!d.stage.value) fail_text(d.section_where, "missing zero_optimization.stage (1, 2 or 3)");
  ZeroOptimizationConfig& z = out.zero_optimization;
  z.stage = static_cast<int>(*d.stage.value);
  z.reduce_bucket_size = value_or(d.reduce_bucket_size, z.reduce_bucket_size);
  z.allgather_bucket_size = value_or(d.allgather_bucket_size, z.allgather_bucket_size);
  z.overlap_comm = value_or(d.overlap_comm, z.stage == 3);  // DeepSpeed's overlap_comm_valid
  z.contiguous_gradients = value_or(d.contiguous_gradients, z.contiguous_gradients);
  z.reduce_scatter = value_or(d.reduce_scatter, z.reduce_scatter);
  z.stage3_prefetch_bucket_size = value_or(d.prefetch, z.stage3_prefetch_bucket_size);
  z.stage3_param_persistence_threshold =
      value_or(d.persistence, z.stage3_param_persistence_threshold);
  z.stage3_max_live_parameters = value_or(d.max_live, z.stage3_max_live_parameters);

  out.fp16_enabled = value_or(d.fp16_enabled, false);
  LossScalerOptions& f = out.fp16;
  f.loss_scale = value_or(d.loss_scale, f.loss_scale);
  f.initial_scale_power =
      static_cast<int>(value_or<int64_t>(d.initial_scale_power, f.initial_scale_power));
  f.loss_scale_window = value_or(d.loss_scale_window, f.loss_scale_window);
  f.hysteresis = static_cast<int>(value_or<int64_t>(d.hysteresis, f.hysteresis));
  f.consecutive_hysteresis = value_or(d.consecutive_hysteresis, f.consecutive_hysteresis);
  f.min_loss_scale = value_or(d.min_loss_scale, f.min_loss_scale);
  if (f.loss_scale == 0 && std::ldexp(1.0, f.initial_scale_power) < f.min_loss_scale) {
    const std::string& where =
        d.min_loss_scale.value ? d.min_loss_scale.where : d.initial_scale_power.where;
    fail_text(where, "the initial loss scale 2^" + std::to_string(f.initial_scale_power) +
                         " is below fp16.min_loss_scale (" + std::to_string(f.min_loss_scale) +
                         "): DeepSpeed would raise the scale on the first overflow");
  }
  out.bf16_enabled = value_or(d.bf16_enabled, false);
  if (out.fp16_enabled && out.bf16_enabled) {
    fail_text(d.bf16_enabled.where, "fp16 and bf16 are both enabled (fp16.enabled at " +
                                        d.fp16_enabled.where + "): enable one of them");
  }
  out.inputs_to_half = value_or(d.inputs_to_half, false);
  if (out.inputs_to_half && !out.fp16_enabled && !out.bf16_enabled)
    fail_text(d.inputs_to_half.where,
              "casts the inputs to the half-precision compute dtype, but neither fp16.enabled "
              "nor bf16.enabled is true");
  out.gradient_clipping = value_or(d.gradient_clipping, 0.0);
  return out;
}

void apply_json(Draft& d, const std::string& text, const std::string& file) {
  JsonValue root;
  try {
    root = parse_json(text);
  } catch (const JsonError& e) {
    throw rh::Exception(RH_ERROR_INVALID_CONFIG, file + ":" + std::to_string(e.line()) + ":" +
                                                     std::to_string(e.column()) +
                                                     ": not valid JSON: " + e.message());
  }
  JsonView view(root, file, "");
  if (!view.is_map())
    fail_text(file + ":" + std::to_string(root.line) + ":" + std::to_string(root.column),
              "a DeepSpeed config must be a JSON object, got " + root.kind_name());
  Validator(d).top(view);
}

}  // namespace

ZeroConfig ZeroConfig::from_json(const std::string& text, const std::string& file) {
  Draft d;
  d.section_where = file;
  apply_json(d, text, file);
  return finish(d);
}

ZeroConfig ZeroConfig::from_config(const rh::Config& strategy, const std::string& job_dir) {
  ConfigView view(strategy);
  if (!view.is_map()) view.fail("expected a map");
  Draft d;
  d.section_where = view.where();
  std::string resolved;
  const rh::Config ds = strategy.child("deepspeed_config");
  if (ds.present() && ds.kind() != RH_CONFIG_NULL) {
    const std::string written = ds.as<std::string>();
    fs::path path(written);
    if (path.is_relative() && !job_dir.empty()) path = fs::path(job_dir) / path;
    resolved = path.lexically_normal().string();
    std::ifstream in(resolved, std::ios::binary);
    if (!in) {
      const int err = errno;
      ds.throw_error("cannot read the DeepSpeed config '" + written + "' (" + resolved +
                     "): " + std::strerror(err));
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) ds.throw_error("cannot read the DeepSpeed config '" + resolved + "'");
    apply_json(d, text.str(), resolved);
  }
  Validator(d).top(view);  // the job's keys over the file's
  ZeroConfig out = finish(d);
  out.deepspeed_config = resolved;
  return out;
}

}  // namespace rh::zero
