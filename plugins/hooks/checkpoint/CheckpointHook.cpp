// Hook `checkpoint` (MMEngine's CheckpointHook): decides when to checkpoint
// and which checkpoints to keep. The host writes and deletes them
// (rh_HostApi::Checkpoint_Save / Checkpoint_Remove, ABI 1.1), so every
// strategy and checkpoint-IO backend gets the same protocol.
//
// Config:
//   hooks:
//     - type: checkpoint
//       interval: 1          # every N epochs (by_epoch) or iterations; -1: no regular
//                            # saves (only save_last / save_best)
//       by_epoch: true       # count epochs (after_train_epoch) or iterations (after_train_iter)
//       save_begin: 0        # regular saves at n = save_begin, save_begin + interval, ...
//                            # (n = epochs or iterations done, n >= 1)
//       max_keep_ckpts: -1   # keep the newest N regular checkpoints (-1: all); never
//                            # touches best checkpoints
//       save_last: true      # also save after the last epoch/iteration when off-interval
//       save_best: ~         # a val metric (e.g. accuracy/top1), `auto` (the first
//                            # metric of the first val epoch), or null
//       rule: ~              # greater | less; default: less when the metric's name
//                            # contains "loss", else greater
//
// Names (directories of work_dir; n = epochs / iterations done, 1-based):
//   epoch_<n> | iter_<n>                          regular
//   best_<metric>_epoch_<n> | best_<metric>_iter_<n>   best so far; the metric's name with
//                                                 every character outside [A-Za-z0-9_.-]
//                                                 replaced by '_' (accuracy/top1 -> accuracy_top1)
// A new best is saved first, then the previous best is removed. When more
// than max_keep_ckpts regular checkpoints exist, the oldest are removed after
// the new one is saved; a removal that fails is logged and retried at the
// next save (one that is already gone is dropped).
//
// State saved with every checkpoint (before_save_checkpoint) and restored on
// resume (after_load_checkpoint), as byte blobs:
//   version           "1"
//   kept_checkpoints  the regular checkpoints kept, oldest first, '\n'-separated
//   best_metric, best_rule, best_score (shortest exact decimal), best_checkpoint
//                     only once there is a best
// The state a checkpoint carries already counts that checkpoint (the hook
// updates its lists before it calls Checkpoint_Save, which runs
// before_save_checkpoint). A restored best is only used when the job tracks
// the same metric with the same rule.
//
// Priority VERY_LOW: it runs after every other hook has seen the iteration.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "rh/cpp/plugin.hpp"

namespace {

enum class Rule { Greater, Less };

const char* rule_name(Rule r) { return r == Rule::Greater ? "greater" : "less"; }

Rule infer_rule(const std::string& metric) {
  return metric.find("loss") != std::string::npos ? Rule::Less : Rule::Greater;
}

// A metric name as a checkpoint name part: [A-Za-z0-9_.-], anything else '_'.
std::string name_part(const std::string& metric) {
  std::string out = metric;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

std::string double_text(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

class CheckpointHook {
 public:
  explicit CheckpointHook(const rh_CreateArgs& args)
      : host_(args.host), context_(args.context), cfg_(args.host, args.config) {
    interval_ = cfg_.get<int64_t>("interval", 1);
    if (interval_ == 0 || interval_ < -1)
      cfg_.child("interval")
          .throw_error("must be >= 1, or -1 for no regular saves; got " +
                       std::to_string(interval_));
    by_epoch_ = cfg_.get<bool>("by_epoch", true);
    save_begin_ = cfg_.get<int64_t>("save_begin", 0);
    if (save_begin_ < 0)
      cfg_.child("save_begin").throw_error("must be >= 0, got " + std::to_string(save_begin_));
    max_keep_ = cfg_.get<int64_t>("max_keep_ckpts", -1);
    if (max_keep_ == 0 || max_keep_ < -1)
      cfg_.child("max_keep_ckpts")
          .throw_error("must be >= 1, or -1 to keep every checkpoint; got " +
                       std::to_string(max_keep_));
    save_last_ = cfg_.get<bool>("save_last", true);

    const rh::Config best = cfg_.child("save_best");
    if (best.present() && best.kind() != RH_CONFIG_NULL) {
      save_best_ = true;
      metric_ = best.as<std::string>();
      if (metric_.empty()) best.throw_error("must name a metric, `auto`, or be null");
      if (metric_ == "auto") metric_.clear();  // resolved at the first val epoch
    }
    const rh::Config rule = cfg_.child("rule");
    if (rule.present() && rule.kind() != RH_CONFIG_NULL) {
      const std::string r = rule.as<std::string>();
      if (r != "greater" && r != "less")
        rule.throw_error("expected greater or less, got '" + r + "'");
      if (!save_best_) rule.throw_error("has no effect without save_best");
      rule_ = r == "greater" ? Rule::Greater : Rule::Less;
      rule_set_ = true;
    } else if (!metric_.empty()) {
      rule_ = infer_rule(metric_);
    }

    if (!RH_STRUCT_HAS(host_, rh_HostApi, Checkpoint_Save) || host_->Checkpoint_Save == nullptr) {
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "checkpoint hook: this host does not provide Checkpoint_Save (an "
                          "ABI 1.1 entry; the host has ABI " +
                              std::to_string(host_->abi_major) + "." +
                              std::to_string(host_->abi_minor) + ")");
    }
    if ((max_keep_ > 0 || save_best_) && (!RH_STRUCT_HAS(host_, rh_HostApi, Checkpoint_Remove) ||
                                          host_->Checkpoint_Remove == nullptr)) {
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "checkpoint hook: max_keep_ckpts and save_best need Checkpoint_Remove, "
                          "which this host does not provide");
    }
  }

  uint64_t event_mask() const {
    uint64_t mask = RH_EVENT_BIT(RH_EVENT_BEFORE_TRAIN) |
                    RH_EVENT_BIT(RH_EVENT_BEFORE_SAVE_CHECKPOINT) |
                    RH_EVENT_BIT(RH_EVENT_AFTER_LOAD_CHECKPOINT);
    mask |= by_epoch_ ? RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_EPOCH)
                      : RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER);
    if (save_best_) mask |= RH_EVENT_BIT(RH_EVENT_AFTER_VAL_EPOCH);
    return mask;
  }
  int32_t priority() const { return RH_PRIORITY_VERY_LOW; }

  void on_event(const rh_HookEventArgs& e) {
    const rh_RunState& s = *e.state;
    switch (e.event) {
      case RH_EVENT_BEFORE_TRAIN:
        if (by_epoch_ && s.max_epochs == 0) {
          cfg_.throw_error(
              "by_epoch is true, but the train loop is iteration based (max_epochs is 0): set "
              "by_epoch: false");
        }
        break;
      case RH_EVENT_AFTER_TRAIN_ITER: {  // the iteration that ran (0-based)
        const int64_t done = s.iter + 1;
        if (!by_epoch_ && (due(done) || (save_last_ && done == s.max_iters)))
          save_regular("iter_" + std::to_string(done));
        break;
      }
      case RH_EVENT_AFTER_TRAIN_EPOCH: {  // the epoch that ended (0-based)
        const int64_t done = s.epoch + 1;
        if (by_epoch_ && (due(done) || (save_last_ && done == s.max_epochs)))
          save_regular("epoch_" + std::to_string(done));
        break;
      }
      case RH_EVENT_AFTER_VAL_EPOCH:
        if (save_best_) consider_best(e);
        break;
      case RH_EVENT_BEFORE_SAVE_CHECKPOINT:
        if (e.checkpoint != nullptr) export_state(e.checkpoint);
        break;
      case RH_EVENT_AFTER_LOAD_CHECKPOINT:
        if (e.checkpoint != nullptr) import_state(e.checkpoint);
        break;
      default:
        break;
    }
  }

 private:
  bool due(int64_t n) const {
    return interval_ > 0 && n >= save_begin_ && (n - save_begin_) % interval_ == 0;
  }

  void save(const std::string& name) {
    rh::check(host_, host_->Checkpoint_Save(context_, name.data(), name.size()));
  }

  // True when `name` is gone (removed now, or already absent).
  bool remove(const std::string& name) {
    rh::ErrorPtr err(host_, host_->Checkpoint_Remove(context_, name.data(), name.size()));
    if (!err) return true;
    if (err.code() == RH_ERROR_NOT_FOUND) {
      rh::log(host_, context_, RH_LOG_DEBUG, "checkpoint " + name + " was already removed");
      return true;
    }
    rh::log(host_, context_, RH_LOG_WARN,
            "could not remove checkpoint " + name + ": " + err.message());
    return false;
  }

  void save_regular(const std::string& name) {
    const std::deque<std::string> before = kept_;
    kept_.erase(std::remove(kept_.begin(), kept_.end(), name), kept_.end());
    kept_.push_back(name);
    std::vector<std::string> drop;
    while (max_keep_ > 0 && static_cast<int64_t>(kept_.size()) > max_keep_) {
      drop.push_back(kept_.front());
      kept_.pop_front();
    }
    try {
      save(name);
    } catch (...) {
      kept_ = before;
      throw;
    }
    // Oldest first; those that could not be removed go back to the front
    // (still on disk, still the oldest) and are retried at the next save.
    std::vector<std::string> failed;
    for (const std::string& old : drop)
      if (!remove(old)) failed.push_back(old);
    kept_.insert(kept_.begin(), failed.begin(), failed.end());
  }

  void consider_best(const rh_HookEventArgs& e) {
    if (e.num_metrics == 0) {
      rh::log(host_, context_, RH_LOG_WARN,
              "save_best: this val epoch reported no metrics; no best checkpoint considered");
      return;
    }
    if (metric_.empty()) {  // save_best: auto
      metric_ = rh::to_string(e.metrics[0].name);
      if (!rule_set_) rule_ = infer_rule(metric_);
      reconcile_restored_best();
    }
    std::optional<double> score;
    std::string available;
    for (size_t i = 0; i < e.num_metrics; ++i) {
      const std::string name = rh::to_string(e.metrics[i].name);
      if (name == metric_) score = e.metrics[i].value;
      available += (available.empty() ? "" : ", ") + name;
    }
    if (!score) {
      cfg_.child("save_best")
          .throw_error("metric '" + metric_ + "' is not among the metrics of this val epoch (" +
                       available + ")");
    }
    // In val events the run state counts the train epochs / iterations done.
    const int64_t n = by_epoch_ ? e.state->epoch : e.state->iter;
    if (n <= 0) {
      rh::log(host_, context_, RH_LOG_DEBUG,
              "save_best: no training step done in this run yet; no best checkpoint considered");
      return;
    }
    if (std::isnan(*score)) return;
    if (best_ && !(rule_ == Rule::Greater ? *score > best_->score : *score < best_->score)) return;

    const std::string name =
        "best_" + name_part(metric_) + (by_epoch_ ? "_epoch_" : "_iter_") + std::to_string(n);
    const std::optional<Best> previous = best_;
    best_ = Best{*score, name};
    try {
      save(name);
    } catch (...) {
      best_ = previous;
      throw;
    }
    rh::log(host_, context_, RH_LOG_INFO,
            "new best " + metric_ + " = " + double_text(*score) + ": saved " + name +
                (previous ? " (was " + double_text(previous->score) + ", " + previous->name + ")"
                          : ""));
    if (previous && previous->name != name) remove(previous->name);
  }

  // ---- Checkpoint state ------------------------------------------------------

  void put(rh_StateDict* dict, const std::string& key, const std::string& value) {
    rh::check(host_,
              host_->StateDict_PutBytes(dict, key.data(), key.size(), value.data(), value.size()));
  }

  std::optional<std::string> get(const rh_StateDict* dict, const std::string& key) {
    rh_StringView v{};
    rh::ErrorPtr err(host_, host_->StateDict_GetBytes(dict, key.data(), key.size(), &v));
    if (!err) return rh::to_string(v);
    if (err.code() == RH_ERROR_NOT_FOUND) return std::nullopt;
    rh::check(host_, err.release());
    return std::nullopt;
  }

  void export_state(rh_StateDict* dict) {
    put(dict, "version", "1");
    std::string kept;
    for (const std::string& k : kept_) kept += (kept.empty() ? "" : "\n") + k;
    put(dict, "kept_checkpoints", kept);
    if (best_) {
      put(dict, "best_metric", metric_);
      put(dict, "best_rule", rule_name(rule_));
      put(dict, "best_score", double_text(best_->score));
      put(dict, "best_checkpoint", best_->name);
    }
  }

  void import_state(const rh_StateDict* dict) {
    if (host_->StateDict_Size(dict) == 0) return;  // the checkpoint has no state for this hook
    const std::optional<std::string> version = get(dict, "version");
    if (version != std::string("1")) {
      throw rh::Exception(RH_ERROR_FAILED_PRECONDITION,
                          "checkpoint hook: the checkpoint's hook state has version '" +
                              version.value_or("(none)") +
                              "', this hook reads version 1 (written by a newer runner?)");
    }
    kept_.clear();
    const std::string kept = get(dict, "kept_checkpoints").value_or("");
    for (size_t pos = 0; pos < kept.size();) {
      size_t end = kept.find('\n', pos);
      if (end == std::string::npos) end = kept.size();
      if (end > pos) kept_.push_back(kept.substr(pos, end - pos));
      pos = end + 1;
    }
    restored_.reset();
    best_.reset();
    const std::optional<std::string> metric = get(dict, "best_metric");
    const std::optional<std::string> rule = get(dict, "best_rule");
    const std::optional<std::string> score = get(dict, "best_score");
    const std::optional<std::string> name = get(dict, "best_checkpoint");
    if (metric && rule && score && name) {
      double v = 0;
      const char* end = score->data() + score->size();
      auto r = std::from_chars(score->data(), end, v);
      if (r.ec != std::errc() || r.ptr != end) {
        throw rh::Exception(RH_ERROR_DATA_LOSS,
                            "checkpoint hook: best_score '" + *score + "' is not a number");
      }
      restored_ = Restored{*metric, *rule, Best{v, *name}};
    }
    if (save_best_ && metric_.empty() && restored_) {  // auto: the run tracked this metric
      metric_ = restored_->metric;
      if (!rule_set_) rule_ = infer_rule(metric_);
    }
    reconcile_restored_best();
  }

  // Adopts the restored best when it is for the metric and rule this job tracks.
  void reconcile_restored_best() {
    if (!restored_ || !save_best_ || metric_.empty()) return;
    if (restored_->metric == metric_ && restored_->rule == rule_name(rule_)) {
      best_ = restored_->best;
    } else {
      rh::log(host_, context_, RH_LOG_WARN,
              "the checkpoint's best (" + restored_->best.name + ") is for " + restored_->metric +
                  " (" + restored_->rule + "); this job tracks " + metric_ + " (" +
                  rule_name(rule_) + "): starting a new best, " + restored_->best.name +
                  " is kept");
    }
    restored_.reset();
  }

  struct Best {
    double score;
    std::string name;
  };
  struct Restored {
    std::string metric;
    std::string rule;
    Best best;
  };

  const rh_HostApi* host_;
  rh_Context* context_;
  rh::Config cfg_;

  int64_t interval_ = 1;
  bool by_epoch_ = true;
  int64_t save_begin_ = 0;
  int64_t max_keep_ = -1;
  bool save_last_ = true;
  bool save_best_ = false;
  std::string metric_;  // empty: `auto`, not resolved yet
  Rule rule_ = Rule::Greater;
  bool rule_set_ = false;

  std::deque<std::string> kept_;  // regular checkpoints, oldest first
  std::optional<Best> best_;
  std::optional<Restored> restored_;  // a best read from a checkpoint, not yet reconciled
};

const rh_Component kComponents[] = {
    rh::hook_component<CheckpointHook>(
        "checkpoint",
        "saves checkpoints every N epochs/iterations, the last and the best; keeps the newest N"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_hook_checkpoint", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
