// Hook `logger` (MMEngine's LoggerHook): training progress and evaluation
// results, as lines through the host's logger.
//
// Config:
//   hooks:
//     - type: logger
//       interval: 10               # a line every N train iterations, and at the
//                                  # last iteration of each epoch and of the run
//       log_metric_by_epoch: true  # label by epoch (Epoch(train) [e][i/n]);
//                                  # false: by iteration (Iter(train) [i/n])
//       progress_bar: auto         # auto: when stdout is a terminal | true | false
//
// Train line (after_train_iter), items separated by two spaces:
// clang-format off
//   Epoch(train) [2][ 40/128]  lr: 2.0000e-03  eta: 0:00:31  time: 0.0123  data_time: 0.0011  samples/s: 5203  loss: 0.4321  memory: 212  rss: 198
// clang-format on
//   - [epoch][i/n]: epoch + 1, inner_iter + 1 right-aligned to the width of n =
//     max_iters / max_epochs; an iteration-based run (max_epochs == 0) or
//     log_metric_by_epoch: false gives `Iter(train) [ 296/1000]` (iter + 1 / max_iters)
//   - every metric of the event is printed, in this order: names ending in
//     "lr" (latest value, %.4e), eta, time, data_time, the others in the order
//     the host sent them, memory (from memory_mb, the largest of the
//     interval, integer), rss (rss_mb, the latest, integer). Other values
//     are the mean over the iterations since the previous line (%.4f).
//   - samples/s (tokens/s for language models), after data_time: the job's
//     throughput over the interval (job_samples_per_s / job_tokens_per_s
//     weighted by each iteration's time: samples over seconds, not a mean of
//     rates); the per-rank figures (samples_per_s, tokens_per_s) are left
//     to the metrics file.
//   - eta: mean iteration time (the `time` metric, over every iteration this
//     process has seen; without it, the wall clock between events) times
//     max_iters - (iter + 1), formatted like Python's timedelta (0:00:31,
//     1 day, 2:03:04); left out until it is known.
// Evaluation line (after_val_epoch / after_test_epoch):
//   Epoch(val) [2][32/32]  accuracy/top1: 91.2000  loss: 0.3000
//   - [2]: train epochs done (the run state's epoch in val/test events), so a
//     val line carries the number of the train lines before it
//   - [n/n] counts the after_val_iter (after_test_iter) events of the loop;
//     `Iter(val) [32/32]` in an iteration-based run or with
//     log_metric_by_epoch: false, `Epoch(val) [32/32]` in a job without training.
//
// With a progress bar (stdout a terminal), train iterations redraw one line
// on stdout with '\r' instead of logging lines (at most every 0.1 s, and at the
// ends of epochs); evaluation results are still logged as lines.
//
// Only rank 0 logs, so a job of N ranks prints each line once.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "rh/cpp/metric_names.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// MMEngine's formats: %.4f for values, %.4e for learning rates, %.0f for memory.
std::string fixed4(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", value);
  return buf;
}
std::string sci4(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4e", value);
  return buf;
}
std::string integer(double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", value);
  return buf;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Python's str(datetime.timedelta(seconds=int(s))): "0:00:31", "1 day, 2:03:04".
std::string format_eta(double seconds) {
  int64_t s = seconds > 0 ? static_cast<int64_t>(seconds) : 0;
  const int64_t days = s / 86400;
  s %= 86400;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%" PRId64 ":%02" PRId64 ":%02" PRId64, s / 3600, s / 60 % 60,
                s % 60);
  if (days == 0) return buf;
  return std::to_string(days) + (days == 1 ? " day, " : " days, ") + buf;
}

std::string right_aligned(int64_t value, int64_t width_of) {
  std::string v = std::to_string(value);
  const std::string w = std::to_string(width_of);
  return w.size() > v.size() ? std::string(w.size() - v.size(), ' ') + v : v;
}

// A metric over the iterations since the last line.
struct WindowItem {
  std::string name;
  double sum = 0;
  int64_t count = 0;
  double last = 0;
  double max = 0;
};

class LoggerHook {
 public:
  explicit LoggerHook(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    interval_ = cfg.get<int64_t>("interval", 10);
    if (interval_ < 1)
      cfg.child("interval").throw_error("must be >= 1, got " + std::to_string(interval_));
    by_epoch_ = cfg.get<bool>("log_metric_by_epoch", true);
    const std::string bar = cfg.get<std::string>("progress_bar", "auto");
    if (bar == "auto") {
      bar_ = ::isatty(1) == 1;
    } else if (bar == "true" || bar == "false") {
      bar_ = bar == "true";
    } else {
      cfg.child("progress_bar").throw_error("expected auto, true or false, got '" + bar + "'");
    }
  }

  uint64_t event_mask() const {
    return RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER) | RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN) |
           RH_EVENT_BIT(RH_EVENT_BEFORE_VAL_EPOCH) | RH_EVENT_BIT(RH_EVENT_AFTER_VAL_ITER) |
           RH_EVENT_BIT(RH_EVENT_AFTER_VAL_EPOCH) | RH_EVENT_BIT(RH_EVENT_BEFORE_TEST_EPOCH) |
           RH_EVENT_BIT(RH_EVENT_AFTER_TEST_ITER) | RH_EVENT_BIT(RH_EVENT_AFTER_TEST_EPOCH);
  }
  int32_t priority() const { return RH_PRIORITY_BELOW_NORMAL; }

  void on_event(const rh_HookEventArgs& e) {
    if (e.state->rank != 0) return;
    switch (e.event) {
      case RH_EVENT_AFTER_TRAIN_ITER:
        after_train_iter(e);
        break;
      case RH_EVENT_BEFORE_VAL_EPOCH:
      case RH_EVENT_BEFORE_TEST_EPOCH:
        end_bar_line();
        eval_iters_ = 0;
        break;
      case RH_EVENT_AFTER_VAL_ITER:
      case RH_EVENT_AFTER_TEST_ITER:
        ++eval_iters_;
        break;
      case RH_EVENT_AFTER_VAL_EPOCH:
      case RH_EVENT_AFTER_TEST_EPOCH:
        end_bar_line();
        log(eval_line(e));
        break;
      case RH_EVENT_AFTER_TRAIN:
        end_bar_line();
        break;
      default:
        break;
    }
  }

  ~LoggerHook() { end_bar_line(); }
  LoggerHook(const LoggerHook&) = delete;
  LoggerHook& operator=(const LoggerHook&) = delete;

 private:
  // Where a train iteration stands: its label and whether a line is due.
  struct Progress {
    std::string label;  // "Epoch(train) [2][ 40/128]"
    int64_t done = 0;   // iterations done in what the label counts
    int64_t total = 0;  // 0 when unknown
    bool end_of_epoch = false;
    bool end_of_run = false;
  };

  // The label is only built when asked for (a line or a bar is drawn), so
  // an iteration without output allocates nothing.
  Progress progress(const rh_RunState& s, bool with_label) const {
    Progress p;
    const int64_t per_epoch = s.max_epochs > 0 && s.max_iters > 0 && s.max_iters % s.max_epochs == 0
                                  ? s.max_iters / s.max_epochs
                                  : 0;
    p.end_of_epoch = per_epoch > 0 && s.inner_iter + 1 == per_epoch;
    p.end_of_run = s.max_iters > 0 && s.iter + 1 == s.max_iters;
    const bool by_epoch = by_epoch_ && s.max_epochs > 0;
    p.done = by_epoch ? s.inner_iter + 1 : s.iter + 1;
    p.total = by_epoch ? per_epoch : s.max_iters;
    if (!with_label) return p;
    p.label = by_epoch ? "Epoch(train) [" + std::to_string(s.epoch + 1) + "][" + counter(p) + "]"
                       : "Iter(train) [" + counter(p) + "]";
    return p;
  }

  static std::string counter(const Progress& p) {
    if (p.total <= 0) return std::to_string(p.done);
    return right_aligned(p.done, p.total) + "/" + std::to_string(p.total);
  }

  static bool is_job_throughput(std::string_view name) {
    return name == "job_samples_per_s" || name == "job_tokens_per_s";
  }
  static bool is_throughput(std::string_view name) {
    return is_job_throughput(name) || name == "samples_per_s" || name == "tokens_per_s";
  }

  void after_train_iter(const rh_HookEventArgs& e) {
    const rh_RunState& s = *e.state;
    const Clock::time_point now = Clock::now();
    keep(e);
    if (!clock_started_) {
      clock_started_ = true;
      clock_start_ = now;
      clock_start_iter_ = s.iter;
    }

    const Progress p = progress(s, false);
    const bool line_due = p.done % interval_ == 0 || p.end_of_epoch || p.end_of_run;
    if (line_due) {
      fold_kept();
      report_ = fields(eta_seconds(s, now));
      clear_window();
    }
    if (!bar_) {
      if (line_due) log(progress(s, true).label + "  " + report_);
      return;
    }
    const bool last = p.end_of_epoch || p.end_of_run;
    if (line_due || !bar_open_ || now - last_draw_ >= std::chrono::milliseconds(100)) {
      draw_bar(progress(s, true));
      last_draw_ = now;
    }
    if (last) end_bar_line();
  }

  // Keeps an iteration's values; they are added to the window at the next
  // line (or every kKeptRows iterations). Adding them as they came ran cold
  // every iteration (the model's work in between evicts this code and the
  // window from the caches); an iteration now only copies its numbers.
  void keep(const rh_HookEventArgs& e) {
    if (!kept_names_.same_as(e)) {
      fold_kept();
      kept_names_.assign(e);
    }
    for (size_t i = 0; i < e.num_metrics; ++i) kept_values_.push_back(e.metrics[i].value);
    if (++kept_rows_ == kKeptRows) fold_kept();
  }

  // Adds the kept iterations to the window, in the order they came.
  void fold_kept() {
    const size_t n = kept_names_.size();
    for (size_t row = 0; row < kept_rows_; ++row) {
      double iter_time = 0;  // this iteration's `time` (sent before the throughput)
      for (size_t i = 0; i < n; ++i) {
        const std::string_view name = kept_names_[i];
        const double v = kept_values_[row * n + i];
        add_to_window(name, v);
        if (name == "time") {
          time_sum_ += v;
          ++time_count_;
          iter_time = v;
        } else if (is_job_throughput(name) && iter_time > 0) {
          throughput_label_ = name == "job_tokens_per_s" ? "tokens/s" : "samples/s";
          throughput_items_ += v * iter_time;
          throughput_seconds_ += iter_time;
        }
      }
    }
    kept_values_.clear();
    kept_rows_ = 0;
  }

  // The window keeps its items (names) across lines, so the same metrics
  // every iteration cost no allocation; an item not seen since the last line
  // has count 0 and is not printed.
  void add_to_window(std::string_view name, double v) {
    for (WindowItem& item : window_) {
      if (item.name == name) {
        item.sum = item.count == 0 ? v : item.sum + v;
        item.last = v;
        item.max = item.count == 0 ? v : std::max(item.max, v);
        ++item.count;
        return;
      }
    }
    window_.push_back({std::string(name), v, 1, v, v});
  }
  void clear_window() {
    for (WindowItem& item : window_) item.count = 0;
    throughput_items_ = 0;
    throughput_seconds_ = 0;
  }

  // Seconds left, or a negative value when not known yet.
  double eta_seconds(const rh_RunState& s, Clock::time_point now) const {
    if (s.max_iters <= 0) return -1;
    double mean = -1;
    if (time_count_ > 0) {
      mean = time_sum_ / static_cast<double>(time_count_);
    } else if (s.iter > clock_start_iter_) {
      mean = std::chrono::duration<double>(now - clock_start_).count() /
             static_cast<double>(s.iter - clock_start_iter_);
    }
    if (mean < 0) return -1;
    const int64_t left = s.max_iters - (s.iter + 1);
    return mean * static_cast<double>(left > 0 ? left : 0);
  }

  // "lr: 2.0000e-03  eta: 0:00:31  time: 0.0123  data_time: 0.0011  loss: 0.4321  memory: 212"
  std::string fields(double eta) const {
    std::vector<std::string> items;
    const auto mean = [](const WindowItem& w) { return w.sum / static_cast<double>(w.count); };
    for (const WindowItem& w : window_)
      if (w.count > 0 && ends_with(w.name, "lr")) items.push_back(w.name + ": " + sci4(w.last));
    if (eta >= 0) items.push_back("eta: " + format_eta(eta));
    for (const char* timing : {"time", "data_time"}) {
      for (const WindowItem& w : window_)
        if (w.count > 0 && w.name == timing) items.push_back(w.name + ": " + fixed4(mean(w)));
    }
    if (throughput_seconds_ > 0)
      items.push_back(throughput_label_ + ": " + integer(throughput_items_ / throughput_seconds_));
    const WindowItem* memory = nullptr;
    const WindowItem* rss = nullptr;
    for (const WindowItem& w : window_) {
      if (w.count == 0) continue;
      if (w.name == "memory_mb") {
        memory = &w;
      } else if (w.name == "rss_mb") {
        rss = &w;
      } else if (!ends_with(w.name, "lr") && w.name != "time" && w.name != "data_time" &&
                 !is_throughput(w.name)) {
        items.push_back(w.name + ": " + fixed4(mean(w)));
      }
    }
    if (memory != nullptr) items.push_back("memory: " + integer(memory->max));
    if (rss != nullptr) items.push_back("rss: " + integer(rss->last));
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : "  ") + item;
    return out;
  }

  std::string eval_line(const rh_HookEventArgs& e) const {
    const rh_RunState& s = *e.state;
    const std::string mode = e.event == RH_EVENT_AFTER_TEST_EPOCH ? "test" : "val";
    std::string line;
    const std::string count = eval_iters_ > 0 ? "[" + std::to_string(eval_iters_) + "/" +
                                                    std::to_string(eval_iters_) + "]"
                                              : "";
    if (by_epoch_ && s.max_epochs > 0) {  // in val/test events, epoch = train epochs done
      line = "Epoch(" + mode + ") [" + std::to_string(s.epoch) + "]" + count;
    } else if (s.max_iters > 0) {
      line = "Iter(" + mode + ")" + (count.empty() ? "" : " " + count);
    } else {
      line = "Epoch(" + mode + ")" + (count.empty() ? "" : " " + count);
    }
    for (size_t i = 0; i < e.num_metrics; ++i) {
      const std::string name = rh::to_string(e.metrics[i].name);
      line += "  " + name + ": " + (ends_with(name, "lr") ? sci4 : fixed4)(e.metrics[i].value);
    }
    return line;
  }

  // "\rEpoch(train) [2][ 40/128] [=======>            ]  31%  lr: ...  loss: ..."
  void draw_bar(const Progress& p) {
    std::string line = "\r" + p.label;
    if (p.total > 0) {
      constexpr int64_t kWidth = 30;
      const int64_t filled = p.done * kWidth / p.total;
      std::string bar(static_cast<size_t>(kWidth), ' ');
      for (int64_t i = 0; i < filled; ++i) bar[static_cast<size_t>(i)] = '=';
      if (filled < kWidth) bar[static_cast<size_t>(filled)] = '>';
      line += " [" + bar + "] " + right_aligned(p.done * 100 / p.total, 100) + "%";
    }
    if (!report_.empty()) line += "  " + report_;
    line += "\x1b[K";  // clear what a longer previous line left
    write_stdout(line);
    bar_open_ = true;
  }

  void end_bar_line() {
    if (!bar_open_) return;
    write_stdout("\n");
    bar_open_ = false;
  }

  static void write_stdout(const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  }

  void log(const std::string& line) const {
    if (host_->Log_IsEnabled != nullptr && host_->Log_IsEnabled(context_, RH_LOG_INFO) == 0) return;
    rh::log(host_, context_, RH_LOG_INFO, line);
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  int64_t interval_ = 10;
  bool by_epoch_ = true;
  bool bar_ = false;

  static constexpr size_t kKeptRows = 64;  // iterations kept at most before they are added
  rh::MetricNames kept_names_;             // the kept iterations' metric names
  std::vector<double> kept_values_;        // their values, an iteration after another
  size_t kept_rows_ = 0;
  std::vector<WindowItem> window_;
  std::string report_;  // the fields of the last line (what the bar shows)
  double time_sum_ = 0;
  int64_t time_count_ = 0;
  // The interval's job throughput: items (rate x time) and seconds.
  std::string throughput_label_ = "samples/s";
  double throughput_items_ = 0;
  double throughput_seconds_ = 0;
  bool clock_started_ = false;
  Clock::time_point clock_start_;
  int64_t clock_start_iter_ = 0;
  bool bar_open_ = false;
  Clock::time_point last_draw_;
  int64_t eval_iters_ = 0;
};

const rh_Component kComponents[] = {
    rh::hook_component<LoggerHook>("logger",
                                   "logs training progress (loss, lr, eta) and evaluation results"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_hook_logger", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
