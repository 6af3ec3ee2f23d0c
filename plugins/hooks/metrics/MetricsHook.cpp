// Hook `metrics`: every scalar the run reports, as JSON Lines, for plotting
// and for comparing runs with ordinary tools (pandas.read_json(lines=True), jq).
//
// Config:
//   hooks:
//     - type: metrics
//       file: metrics.jsonl   # relative to work_dir (or an absolute path)
//       interval: 1           # a train line every N iterations ((iter + 1) % N == 0)
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
// run continues it. Each line goes out with one write(2), so it is in the
// file when the event returns (a run that dies between lines leaves whole
// lines; a cut last line is ended before the next run appends). Only rank 0
// writes: one file per job, not N interleaved copies.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "rh/cpp/plugin.hpp"

namespace {

namespace fs = std::filesystem;

void append_json_string(std::string& out, std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  out += '"';
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
    path_ = fs::path(rh::to_string(args.work_dir)) / file;  // an absolute `file` wins
  }
  ~MetricsHook() {
    if (fd_ >= 0) ::close(fd_);
  }
  MetricsHook(const MetricsHook&) = delete;
  MetricsHook& operator=(const MetricsHook&) = delete;

  uint64_t event_mask() const {
    return RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER) | RH_EVENT_BIT(RH_EVENT_AFTER_VAL_EPOCH) |
           RH_EVENT_BIT(RH_EVENT_AFTER_TEST_EPOCH);
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
        break;
      case RH_EVENT_AFTER_TEST_EPOCH:
        write_line("test", e.state->epoch, e.state->iter, e);
        break;
      default:
        break;
    }
  }

 private:
  void write_line(const char* mode, int64_t epochs, int64_t iters, const rh_HookEventArgs& e) {
    std::string line = "{\"mode\": ";
    append_json_string(line, mode);
    line += ", \"epoch\": " + std::to_string(epochs);
    line += ", \"iter\": " + std::to_string(iters);
    std::vector<std::string_view> seen = {"mode", "epoch", "iter"};
    for (size_t i = 0; i < e.num_metrics; ++i) {
      const std::string_view name(e.metrics[i].name.data, e.metrics[i].name.size);
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
        warn_skipped(name);
        continue;
      }
      seen.push_back(name);
      line += ", ";
      append_json_string(line, name);
      line += ": ";
      append_json_number(line, e.metrics[i].value);
    }
    line += "}\n";
    if (fd_ < 0) open_file();
    write_all(line);
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
  int fd_ = -1;
  std::vector<std::string> warned_;
};

const rh_Component kComponents[] = {
    {RH_COMPONENT_STRUCT_SIZE, RH_COMPONENT_HOOK, RH_STR("metrics"),
     RH_STR("writes every reported scalar as JSON Lines (metrics.jsonl in work_dir)"),
     &rh::HookAdapter<MetricsHook>::vtable},
};

const rh_PluginInfo kInfo = {
    RH_PLUGIN_INFO_STRUCT_SIZE,
    RH_ABI_VERSION_MAJOR,
    RH_ABI_VERSION_MINOR,
    RH_STR("rh_hook_metrics"),
    RH_STR("0.1.0"),
    RH_NATIVE_TAG_NONE,
    kComponents,
    1,
    nullptr,
    nullptr,
};

}  // namespace

extern "C" RH_EXPORT const rh_PluginInfo* rh_plugin_info(uint32_t, uint32_t) { return &kInfo; }
