// Hook `metrics`: every scalar the run reports, as JSON Lines, for plotting
// and for comparing runs with ordinary tools (pandas.read_json(lines=True), jq).
//
// Config:
//   hooks:
//     - type: metrics
//       file: metrics.jsonl   # relative to work_dir (or an absolute path)
//       interval: 1           # a train line every N iterations ((iter + 1) % N == 0)
//       flush_lines: 100      # lines kept in memory before they are written (1: each
//                             # line written at once)
//       flush_seconds: 0.5    # ... or once the oldest kept line is this old (checked
//                             # when a line is added)
//
// One JSON object per line, keys in this order, then the event's metrics in
// the order the host sent them:
//   {"mode": "train", "epoch": 0, "iter": 10, "loss": 0.43, "lr": 0.002}  after_train_iter
//   {"mode": "val", "epoch": 1, "iter": 100, "accuracy/top1": 91.2}       after_val_epoch
//   {"mode": "test", ...}                                                 after_test_epoch
// `epoch` and `iter` count the train epochs and iterations completed when the
// line is written (so a train line's iter includes its own iteration, and a
// val line after 100 iterations says 100, like the train line before it).
// Numbers are written in their shortest exact form; NaN and infinities
// (not JSON) are written as null. A metric named like a fixed key, or twice
// in one event, is logged as a warning and left out of the line.
//
// The file is opened at the first line to write (a dry run, which creates
// components and sends no events, writes nothing), in append mode: a resumed
// run continues it. Lines are kept in memory, as their numbers, and
// formatted and written together (one write(2) per flush rather than per
// iteration: on small models a write per iteration cost more than the hook's
// own work, and formatting each line as it came ran cold): after flush_lines lines,
// once the oldest is flush_seconds old, and always at the end of every train,
// val and test epoch, before a checkpoint is saved (so a resume from it never
// repeats lines that were lost), at after_train and after_run, and when the
// hook is destroyed, which the host does also when the run fails with an
// error (an exception unwinding through the runner). Only a process killed
// outright (SIGKILL, a crash signal) loses lines: at most the last
// flush_lines lines or flush_seconds. A run that dies mid-write leaves a cut
// last line, which is ended before the next run appends. Only rank 0 writes:
// one file per job, not N interleaved copies.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "formats/Json.hpp"
#include "rh/cpp/metric_names.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// JSON strings through the one escaper (formats/Json).
using rh::json::append_string;

void append_integer(std::string& out, int64_t v) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, result.ptr);
}

void append_json_number(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  char buf[32];
  auto result = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  out.append(buf, result.ptr);
}

class MetricsHook {
 public:
  explicit MetricsHook(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    const std::string file = cfg.get<std::string>("file", "metrics.jsonl");
    if (file.empty()) cfg.child("file").throw_error("must not be empty");
    interval_ = cfg.get<int64_t>("interval", 1);
    if (interval_ < 1)
      cfg.child("interval").throw_error("must be >= 1, got " + std::to_string(interval_));
    flush_lines_ = cfg.get<int64_t>("flush_lines", 100);
    if (flush_lines_ < 1)
      cfg.child("flush_lines").throw_error("must be >= 1, got " + std::to_string(flush_lines_));
    const double flush_seconds = cfg.get<double>("flush_seconds", 0.5);
    if (!(flush_seconds >= 0) || flush_seconds > 3600)
      cfg.child("flush_seconds")
          .throw_error("must be between 0 and 3600, got " + std::to_string(flush_seconds));
    flush_after_ =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(flush_seconds));
    path_ = fs::path(rh::to_string(args.work_dir)) / file;  // an absolute `file` wins
  }
  // Also reached when the run fails: the host destroys its hooks while the
  // error unwinds. A destructor cannot report through the run, so a failed
  // last write is logged.
  ~MetricsHook() {
    try {
      flush();
    } catch (const std::exception& e) {
      rh::log(host_, context_, RH_LOG_ERROR, e.what());
    }
    if (fd_ >= 0) ::close(fd_);
  }
  MetricsHook(const MetricsHook&) = delete;
  MetricsHook& operator=(const MetricsHook&) = delete;

  uint64_t event_mask() const {
    return RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER) | RH_EVENT_BIT(RH_EVENT_AFTER_VAL_EPOCH) |
           RH_EVENT_BIT(RH_EVENT_AFTER_TEST_EPOCH) |
           // Only to flush what is kept:
           RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_EPOCH) | RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN) |
           RH_EVENT_BIT(RH_EVENT_BEFORE_SAVE_CHECKPOINT) | RH_EVENT_BIT(RH_EVENT_AFTER_RUN);
  }

  void on_event(const rh_HookEventArgs& e) {
    if (e.state->rank != 0) return;
    switch (e.event) {
      case RH_EVENT_AFTER_TRAIN_ITER:
        // Train events carry the current epoch and iteration (0-based).
        if ((e.state->iter + 1) % interval_ == 0)
          write_line("train", e.state->epoch, e.state->iter + 1, e);
        break;
      case RH_EVENT_AFTER_VAL_EPOCH:
        write_line("val", e.state->epoch, e.state->iter, e);  // epochs, iterations done
        flush();
        break;
      case RH_EVENT_AFTER_TEST_EPOCH:
        write_line("test", e.state->epoch, e.state->iter, e);
        flush();
        break;
      case RH_EVENT_AFTER_TRAIN_EPOCH:
      case RH_EVENT_AFTER_TRAIN:
      case RH_EVENT_BEFORE_SAVE_CHECKPOINT:
      case RH_EVENT_AFTER_RUN:
        flush();
        break;
      default:
        break;
    }
  }

 private:
  // Keeps one line: its numbers only, formatted when the kept lines are
  // written. Formatting each line as it comes ran cold every iteration (the
  // model's work between two events evicts this code from the caches):
  // measured in the loop, the hook took 2.6 us an iteration on the
  // quickstart, against 1.1 us for a second metrics hook right after it,
  // the same work with the code warm. No allocation once
  // the vectors have grown to their working size.
  void write_line(const char* mode, int64_t epochs, int64_t iters, const rh_HookEventArgs& e) {
    if (fd_ < 0) open_file();  // at the first line: the file exists while the run goes
    if (lines_.empty()) oldest_pending_ = Clock::now();
    lines_.push_back({mode, epochs, iters, keys_for(e), values_.size()});
    for (size_t i = 0; i < e.num_metrics; ++i) values_.push_back(e.metrics[i].value);
    if (static_cast<int64_t>(lines_.size()) >= flush_lines_ ||
        Clock::now() - oldest_pending_ >= flush_after_)
      flush();
  }

  // The metric names of an event, and each one's JSON text (`, "loss": `),
  // empty for a metric left out of the line (a name taken by a fixed key or
  // an earlier metric of the same event).
  struct Keys {
    rh::MetricNames names;
    std::vector<std::string> json;
  };
  // The index in keys_ of the event's names, added when new. Searched from
  // the newest: lines whose names alternate (a metric sent every other
  // iteration) reuse theirs.
  size_t keys_for(const rh_HookEventArgs& e) {
    for (size_t i = keys_.size(); i-- > 0;)
      if (keys_[i].names.same_as(e)) return i;
    keys_.push_back(make_keys(e));
    return keys_.size() - 1;
  }
  Keys make_keys(const rh_HookEventArgs& e) {
    Keys keys;
    keys.names.assign(e);
    std::vector<std::string_view> seen = {"mode", "epoch", "iter"};
    for (size_t i = 0; i < keys.names.size(); ++i) {
      const std::string_view name = keys.names[i];
      std::string json;
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        warn_skipped(name);
      } else {
        seen.push_back(name);
        json = ", ";
        append_string(json, name);
        json += ": ";
      }
      keys.json.push_back(std::move(json));
    }
    return keys;
  }

  // Formats and writes the kept lines. On a failed write they are dropped
  // (the error stops the run, and the destructor must not report the same
  // error again).
  void flush() {
    if (lines_.empty()) return;
    std::string& text = text_;
    text.clear();
    for (const KeptLine& l : lines_) {
      text += "{\"mode\": ";
      append_string(text, l.mode);
      text += ", \"epoch\": ";
      append_integer(text, l.epoch);
      text += ", \"iter\": ";
      append_integer(text, l.iter);
      const Keys& keys = keys_[l.keys];
      for (size_t i = 0; i < keys.json.size(); ++i) {
        if (keys.json[i].empty()) continue;
        text += keys.json[i];
        append_json_number(text, values_[l.first + i]);
      }
      text += "}\n";
    }
    lines_.clear();
    values_.clear();
    // The names stay for the next lines (their number is bounded by the
    // name sets a run sends; a run whose names change all the time keeps
    // only the last 16).
    if (keys_.size() > 16) keys_.erase(keys_.begin(), keys_.end() - 16);
    write_all(text);
  }

  void warn_skipped(std::string_view name) {
    const std::string n(name);
    for (const std::string& w : warned_)
      if (w == n) return;
    warned_.push_back(n);
    rh::log(host_, context_, RH_LOG_WARN,
            "metric '" + n + "' is left out of " + path_.string() +
                ": its name is taken by a fixed key or an earlier metric of the same event");
  }

  void open_file() {
    std::error_code ec;
    if (path_.has_parent_path()) fs::create_directories(path_.parent_path(), ec);
    if (ec) io_error("cannot create the directory " + path_.parent_path().string(), ec.value());
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) io_error("cannot open", errno);
    // A run that died in the middle of a line: start on a fresh one.
    struct stat st {};
    char last = '\n';
    if (::fstat(fd_, &st) == 0 && st.st_size > 0 && ::pread(fd_, &last, 1, st.st_size - 1) == 1 &&
        last != '\n')
      write_all("\n");
  }

  void write_all(const std::string& text) {
    const char* p = text.data();
    size_t left = text.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        io_error("write failed", errno);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

  [[noreturn]] void io_error(const std::string& what, int err) const {
    throw rh::Exception(RH_ERROR_IO,
                        "metrics: " + path_.string() + ": " + what + ": " + std::strerror(err));
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  fs::path path_;
  int64_t interval_ = 1;
  int64_t flush_lines_ = 100;
  Clock::duration flush_after_{};
  int fd_ = -1;
  // A line kept until the next flush.
  struct KeptLine {
    const char* mode;  // "train", "val" or "test"
    int64_t epoch;
    int64_t iter;
    size_t keys;   // its names: keys_[keys]
    size_t first;  // its first value: values_[first]
  };
  std::vector<KeptLine> lines_;
  std::vector<double> values_;  // every kept line's metric values, in order
  std::vector<Keys> keys_;      // the name sets of the kept lines and of recent ones
  std::string text_;            // the kept lines as text, at a flush
  Clock::time_point oldest_pending_;
  std::vector<std::string> warned_;
};

const rh_Component kComponents[] = {
    rh::hook_component<MetricsHook>(
        "metrics", "writes every reported scalar as JSON Lines (metrics.jsonl in work_dir)"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_hook_metrics", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
