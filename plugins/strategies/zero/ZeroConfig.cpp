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

#include "DeepSpeedKeys.hpp"
#include "ZeroConfigView.hpp"

namespace rh::zero {
namespace {

namespace fs = std::filesystem;
using namespace detail;  // View, the key tables, fail_text

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
  Field<bool> auto_cast;  // fp16.auto_cast: the inputs cast to fp16
  Field<double> gradient_clipping;
  Field<int64_t> sub_group_size;
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
    const std::vector<std::string> keys = map.keys();
    if (std::count(keys.begin(), keys.end(), "bf16") &&
        std::count(keys.begin(), keys.end(), "bfloat16"))
      fail_text(map.key_where("bfloat16"), "DeepSpeed's old name for bf16, which is set too (at " +
                                               map.key_where("bf16") + "): write bf16 only");
    for (const std::string& key : keys) {
      if (!map.from_file() && (key == "type" || key == "plugin" || key == "deepspeed_config"))
        continue;  // the host's keys; deepspeed_config is read first by the caller
      const auto c = map.child(key);
      if (key == "zero_optimization") {
        section(
            *c, [&](const std::string& k, const View& v) { return zero_key(k, v); },
            one_way_zero_keys(), zero_keys(), true);
      } else if (key == "fp16") {
        section(
            *c, [&](const std::string& k, const View& v) { return fp16_key(k, v); },
            one_way_fp16_keys(), fp16_keys(), false);
      } else if (key == "bf16" || key == "bfloat16") {  // bfloat16: DeepSpeed's old name
        section(
            *c, [&](const std::string& k, const View& v) { return bf16_key(k, v); },
            one_way_bf16_keys(), {"enabled"}, false);
      } else if (key == "inputs_to_half") {
        inputs_to_half(*c);
      } else if (key == "gradient_clipping") {
        if (c->is_auto()) {
          // Hugging Face's "the trainer's max_grad_norm": the job's
          // optim_wrapper.clip_grad, which the host applies; zero adds none.
          set(d_.gradient_clipping, *c, 0.0);
        } else if (!c->is_null()) {
          const double g = c->as_number();
          if (!(g >= 0) || !std::isfinite(g))
            c->fail("must be >= 0 (the max global gradient norm; 0 = off), got " +
                    std::to_string(g));
          set(d_.gradient_clipping, *c, g);
        }
      } else if (job_keys().count(key) && (c->is_null() || c->is_auto())) {
        // "auto": the job's own value (data.train.batch_size, ...).
      } else if (auto w = one_way_top_keys().find(key); w != one_way_top_keys().end()) {
        one_way(*c, w->second, false);
      } else if (auto s = switched_sections().find(key); s != switched_sections().end()) {
        switched(*c, s->second);
      } else if (key == "activation_checkpointing") {
        activation_checkpointing(*c);
      } else if (key == "aio") {
        aio(*c);
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

  // `read` returns false for a key it does not know. `auto_is_default`:
  // DeepSpeed's config model drops "auto" values (zero_optimization), so
  // there "auto" means DeepSpeed's default.
  void section(const View& map, const std::function<bool(const std::string&, const View&)>& read,
               const OneWayTable& one_ways, const std::vector<std::string>& supported,
               bool auto_is_default) {
    if (map.is_null()) return;  // `fp16:` with nothing under it: nothing set
    if (!map.is_map()) map.fail("expected a map");
    const std::vector<std::string> keys = map.keys();
    for (const std::string& written : keys) {
      std::string key = written;
      if (auto s = zero_synonyms().find(written); auto_is_default && s != zero_synonyms().end()) {
        key = s->second;
        if (std::count(keys.begin(), keys.end(), key))
          fail_text(map.key_where(written), "DeepSpeed's other name for " + key +
                                                ", which is set too (at " + map.key_where(key) +
                                                "): write one of them");
      }
      const auto c = map.child(written);
      // A known key set to null is "not set" (each reader checks).
      if (read(key, *c)) continue;
      if (auto w = one_ways.find(key); w != one_ways.end()) {
        one_way(*c, w->second, auto_is_default);
      } else if (auto_is_default && (key == "offload_optimizer" || key == "offload_param")) {
        offload(*c, key == "offload_optimizer");
      } else {
        unknown(map, written, {}, supported);
      }
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
            "stage3_max_live_parameters",
            "sub_group_size"};
  }
  static std::vector<std::string> fp16_keys() {
    return {"enabled",    "loss_scale",     "initial_scale_power",    "loss_scale_window",
            "hysteresis", "min_loss_scale", "consecutive_hysteresis", "auto_cast"};
  }

  // A key of a OneWay table: accepted when it asks for what zero does.
  static void one_way(const View& v, const OneWay& w, bool auto_is_default) {
    if (v.is_null()) return;
    if (v.is_auto() && auto_is_default) {
      if (w.default_matches) return;
      v.fail("'auto' is DeepSpeed's default here, which asks for " + w.asks +
             ", which runner-host's zero strategy does not implement (" + w.does + "): write " +
             w.accepted + " or remove the key");
    }
    if (w.matches(v)) return;
    v.fail(v.written() + " asks for " + w.asks +
           ", which runner-host's zero strategy does not implement (" + w.does + "): write " +
           w.accepted + " or remove the key");
  }

  // Looks every key below `v` up, so that the host's unknown-key check
  // (which reports keys nobody read) leaves a section that has no effect.
  static void touch(const View& v) {
    if (v.is_map())
      for (const std::string& k : v.keys()) touch(*v.child(k));
    else if (v.is_sequence())
      for (size_t i = 0; i < v.size(); ++i) touch(*v.item(i));
  }

  // offload_optimizer / offload_param: device none asks for no offload.
  void offload(const View& map, bool optimizer) {
    if (map.is_null() || map.is_auto()) return;  // DeepSpeed's default: none
    if (!map.is_map()) map.fail("expected a map");
    static const std::vector<std::string> optimizer_keys = {
        "device",        "nvme_path",      "buffer_count", "pin_memory",
        "pipeline_read", "pipeline_write", "fast_init",    "ratio"};
    static const std::vector<std::string> param_keys = {"device",      "nvme_path",  "buffer_count",
                                                        "buffer_size", "max_in_cpu", "pin_memory"};
    const auto& known = optimizer ? optimizer_keys : param_keys;
    for (const std::string& key : map.keys()) {
      const auto c = map.child(key);
      if (std::find(known.begin(), known.end(), key) == known.end()) unknown(map, key, {}, known);
      if (c->is_null() || c->is_auto()) continue;
      if (key == "device") {
        const std::string device = c->as_string();
        if (device == "none") continue;
        if (device != "cpu" && device != "nvme")
          c->fail("expected none, cpu or nvme, got " + c->written());
        c->fail(c->written() + " asks for offloading " +
                (optimizer ? "the optimizer state" : "the parameters") + " to " +
                (device == "cpu" ? "the CPU" : "NVMe") +
                ", which runner-host's zero strategy does not implement (" +
                (optimizer ? "the optimizer state stays" : "each rank's partitions stay") +
                " in each rank's device memory): write none or remove the section");
      }
      // The rest tunes an offload that is off: checked, no effect.
      if (key == "nvme_path")
        c->as_string();
      else if (key == "pin_memory" || key == "pipeline_read" || key == "pipeline_write" ||
               key == "fast_init")
        c->as_bool();
      else
        c->as_number();
    }
  }

  // A switched section: {enabled: false} asks for nothing.
  static void switched(const View& map, const std::string& asks) {
    if (map.is_null()) return;
    if (!map.is_map()) map.fail("expected a map");
    touch(map);
    const auto enabled = map.child("enabled");
    if (!enabled->is_null() && enabled->as_bool())
      enabled->fail("true asks for " + asks +
                    ", which runner-host's zero strategy does not implement: write false or "
                    "remove the section");
  }

  // DeepSpeed's activation checkpointing configures deepspeed.checkpointing,
  // which only a model calling it uses: every switch off asks for nothing.
  void activation_checkpointing(const View& map) {
    if (map.is_null()) return;
    if (!map.is_map()) map.fail("expected a map");
    static const std::vector<std::string> switches = {"partition_activations", "cpu_checkpointing",
                                                      "contiguous_memory_optimization",
                                                      "synchronize_checkpoint_boundary", "profile"};
    std::vector<std::string> known = switches;
    known.push_back("number_checkpoints");
    for (const std::string& key : map.keys()) {
      const auto c = map.child(key);
      if (std::find(known.begin(), known.end(), key) == known.end()) unknown(map, key, {}, known);
      if (c->is_null()) continue;
      if (key == "number_checkpoints" || c->as_bool())
        c->fail(c->written() +
                " asks for DeepSpeed's activation checkpointing (deepspeed.checkpointing, "
                "which a model's Python code calls), which runner-host's zero strategy does "
                "not implement: remove it; the job's top-level activation_checkpoint: {mode: "
                "full} recomputes every unit under any strategy");
    }
  }

  // Asynchronous I/O for NVMe offload, which is off: checked, no effect.
  void aio(const View& map) {
    if (map.is_null()) return;
    if (!map.is_map()) map.fail("expected a map");
    static const std::vector<std::string> known = {
        "block_size",    "queue_depth",    "thread_count", "intra_op_parallelism",
        "single_submit", "overlap_events", "use_gds"};
    for (const std::string& key : map.keys()) {
      const auto c = map.child(key);
      if (std::find(known.begin(), known.end(), key) == known.end()) unknown(map, key, {}, known);
      if (c->is_null()) continue;
      if (key == "single_submit" || key == "overlap_events" || key == "use_gds")
        c->as_bool();
      else
        c->as_number();
    }
  }

  // MMEngine's inputs_to_half is a list of input names (or indices); the
  // job's `true` is runner-host's own form. runner-host casts one thing:
  // the batch's input tensor, MMEngine's `inputs` (index 0 of a tuple).
  void inputs_to_half(const View& v) {
    if (v.is_null()) return;
    if (!v.is_sequence()) {
      set(d_.inputs_to_half, v, v.as_bool());
      return;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      const auto item = v.item(i);
      if (item->is_map() || item->is_sequence() || item->is_null())
        item->fail("expected an input's name or index, got " + item->written());
      std::string name = item->written();
      if (name.size() >= 2 && name.front() == '"' && name.back() == '"')
        name = name.substr(1, name.size() - 2);  // a JSON string
      if (name != "inputs" && name != "0")
        item->fail("'" + name +
                   "' is not an input runner-host casts: it casts the batch's input tensor, "
                   "MMEngine's 'inputs' (index 0 of a tuple batch); the targets stay as they "
                   "are");
    }
    set(d_.inputs_to_half, v, v.size() > 0);
  }

  [[noreturn]] static void unknown(const View& map, const std::string& key,
                                   const HintTable& unimplemented,
                                   const std::vector<std::string>& supported) {
    const std::string where = map.key_where(key);
    if (auto j = job_keys().find(key); j != job_keys().end()) {
      fail_text(where, "a DeepSpeed key that is a job key in runner-host: set " + j->second +
                           " in the job instead (or write 'auto': the job's value)");
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
    // "auto": DeepSpeed's default (its config model drops the value).
    const bool null = v.is_null() || (v.is_auto() && key != "stage");
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
      if (v.is_auto())
        v.fail("'auto' would be DeepSpeed's default 0, ZeRO disabled: write 1, 2 or 3");
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
    if (key == "sub_group_size") return size(d_.sub_group_size, false);
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
    } else if (key == "auto_cast") {
      if (!null) set(d_.auto_cast, v, v.as_bool());
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
  z.reduce_bucket_size_where = d.reduce_bucket_size.where;
  z.allgather_bucket_size = value_or(d.allgather_bucket_size, z.allgather_bucket_size);
  z.overlap_comm = value_or(d.overlap_comm, z.stage == 3);  // DeepSpeed's overlap_comm_valid
  z.contiguous_gradients = value_or(d.contiguous_gradients, z.contiguous_gradients);
  z.reduce_scatter = value_or(d.reduce_scatter, z.reduce_scatter);
  z.stage3_prefetch_bucket_size = value_or(d.prefetch, z.stage3_prefetch_bucket_size);
  z.stage3_prefetch_bucket_size_where = d.prefetch.where;
  z.stage3_param_persistence_threshold =
      value_or(d.persistence, z.stage3_param_persistence_threshold);
  z.stage3_max_live_parameters = value_or(d.max_live, z.stage3_max_live_parameters);
  // sub_group_size tiles DeepSpeed's stage 3 optimizer step (other stages do
  // not read it); zero steps a rank's partition whole, which is what
  // DeepSpeed's default, 1e9, does for any partition up to that size.
  constexpr int64_t kSubGroupDefault = 1000000000;
  if (z.stage == 3 && value_or<int64_t>(d.sub_group_size, kSubGroupDefault) < kSubGroupDefault)
    fail_text(d.sub_group_size.where,
              std::to_string(*d.sub_group_size.value) +
                  " asks for the stage 3 optimizer step tiled into sub-groups of that many "
                  "elements, which runner-host's zero strategy does not implement (each rank "
                  "steps its partition whole, as DeepSpeed's default 1000000000 does): write "
                  "1000000000 or more, or remove the key");

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
  // fp16.auto_cast (read by DeepSpeed with fp16 on): the inputs cast to fp16,
  // which is what inputs_to_half does.
  if (out.fp16_enabled && value_or(d.auto_cast, false)) {
    if (d.inputs_to_half.value && !*d.inputs_to_half.value)
      fail_text(d.auto_cast.where,
                "casts the inputs to fp16 (DeepSpeed's auto_cast, what "
                "inputs_to_half does), but inputs_to_half is false (at " +
                    d.inputs_to_half.where + "): set one of them");
    out.inputs_to_half = true;
  }
  if (out.inputs_to_half && !out.fp16_enabled && !out.bf16_enabled)
    fail_text(d.inputs_to_half.where,
              "casts the inputs to the half-precision compute dtype, but neither fp16.enabled "
              "nor bf16.enabled is true");
  out.gradient_clipping = value_or(d.gradient_clipping, 0.0);
  return out;
}

}  // namespace

ZeroConfig ZeroConfig::from_json(const std::string& text, const std::string& file) {
  Draft d;
  d.section_where = file;
  Validator(d).top(DeepSpeedJson(text, file).root());
  return finish(d);
}

ZeroConfig ZeroConfig::from_config(const rh::Config& strategy, const std::string& job_dir) {
  const std::unique_ptr<View> view = job_view(strategy);
  if (!view->is_map()) view->fail("expected a map");
  Draft d;
  d.section_where = view->where();
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
    Validator(d).top(DeepSpeedJson(text.str(), resolved).root());
  }
  Validator(d).top(*view);  // the job's keys over the file's
  ZeroConfig out = finish(d);
  out.deepspeed_config = resolved;
  return out;
}

}  // namespace rh::zero
