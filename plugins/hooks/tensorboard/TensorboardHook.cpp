// Hook `tensorboard`: every scalar the run reports, in a TensorBoard event
// file (`tensorboard --logdir work_dir/tensorboard`).
//
// Config:
//   hooks:
//     - type: tensorboard
//       log_dir: tensorboard  # relative to work_dir (or an absolute path)
//       interval: 1           # train scalars every N iterations ((iter + 1) % N == 0)
//       flush_secs: 120       # write buffered events at most this many seconds apart
//       all_ranks: false      # true: every rank writes, into log_dir/rank<r>/
//
// Tags and steps: the train metrics of after_train_iter (loss, lr, grad_norm,
// time, data_time, memory, whatever the host sends) under their own names;
// the metrics of after_val_epoch / after_test_epoch prefixed `val/` and
// `test/`. The step is the number of train iterations done, as in
// metrics.jsonl's `iter` (a train scalar's step includes its own iteration;
// validation after 100 iterations is at step 100). Wall time is the event's.
// Values are float32 `simple_value`s, as torch's SummaryWriter.add_scalar
// writes them.
//
// File: log_dir/events.out.tfevents.<unix seconds>.<host>.<pid>, created at
// the first event (a dry run writes nothing); a resumed run starts a new file
// in the same directory, and TensorBoard reads them as one run. Format:
// TFRecords (uint64 length, masked CRC-32C of the length, the bytes, masked
// CRC-32C of the bytes), each a serialized tensorboard.Event; the first
// holds file_version "brain.Event:2".
//
// Flushing: events are buffered and written with write(2) when flush_secs
// have passed since the last write (checked at each event, so a run stuck
// inside one iteration holds its last events until the next one), when 1 MiB
// is buffered, at the end of every train/val/test epoch, after every
// checkpoint save, after_run, and when the hook is destroyed (a failed run).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <string_view>

#include "Crc32c.hpp"
#include "rh/cpp/plugin.hpp"
#include "tensorboard/compat/proto/event.pb.h"

namespace {

namespace fs = std::filesystem;
using rh::tfrecord::crc32c;
using rh::tfrecord::mask_crc32c;

// A write is due at this much buffered data whatever flush_secs says, so a
// long flush_secs on a fast run does not hold megabytes in memory.
constexpr size_t kMaxBufferedBytes = size_t{1} << 20;

void append_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

// One TFRecord: length, masked CRC-32C of the length's 8 bytes, the data,
// masked CRC-32C of the data; integers little-endian.
void append_record(std::string& out, const std::string& data) {
  std::string header;
  append_le(header, data.size(), 8);
  out += header;
  append_le(out, mask_crc32c(crc32c(header.data(), header.size())), 4);
  out += data;
  append_le(out, mask_crc32c(crc32c(data.data(), data.size())), 4);
}

double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

class TensorboardHook {
 public:
  explicit TensorboardHook(const rh_CreateArgs& args) : host_(args.host), context_(args.context) {
    rh::Config cfg(args.host, args.config);
    const std::string log_dir = cfg.get<std::string>("log_dir", "tensorboard");
    if (log_dir.empty()) cfg.child("log_dir").throw_error("must not be empty");
    interval_ = cfg.get<int64_t>("interval", 1);
    if (interval_ < 1)
      cfg.child("interval").throw_error("must be >= 1, got " + std::to_string(interval_));
    flush_secs_ = cfg.get<double>("flush_secs", 120.0);
    if (!(flush_secs_ >= 0))  // also rejects NaN
      cfg.child("flush_secs")
          .throw_error("must be >= 0 seconds, got " + std::to_string(flush_secs_));
    all_ranks_ = cfg.get<bool>("all_ranks", false);
    log_dir_ = fs::path(rh::to_string(args.work_dir)) / log_dir;  // an absolute log_dir wins
  }
  ~TensorboardHook() {
    // A run that failed gets no after_run: keep what it reported.
    if (fd_ >= 0) {
      try {
        flush();
      } catch (const std::exception& e) {
        rh::log(host_, context_, RH_LOG_ERROR, e.what());
      }
      ::close(fd_);
    }
  }
  TensorboardHook(const TensorboardHook&) = delete;
  TensorboardHook& operator=(const TensorboardHook&) = delete;

  uint64_t event_mask() const {
    return RH_EVENT_BIT(RH_EVENT_BEFORE_RUN) | RH_EVENT_BIT(RH_EVENT_AFTER_RUN) |
           RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_ITER) | RH_EVENT_BIT(RH_EVENT_AFTER_TRAIN_EPOCH) |
           RH_EVENT_BIT(RH_EVENT_AFTER_VAL_EPOCH) | RH_EVENT_BIT(RH_EVENT_AFTER_TEST_EPOCH) |
           RH_EVENT_BIT(RH_EVENT_AFTER_SAVE_CHECKPOINT);
  }

  void on_event(const rh_HookEventArgs& e) {
    const int32_t rank = e.state->rank;
    if (rank != 0 && !all_ranks_) return;
    if (fd_ < 0) open_file(rank);
    switch (e.event) {
      case RH_EVENT_AFTER_TRAIN_ITER:
        // Train events carry the current iteration (0-based): the step counts it.
        if ((e.state->iter + 1) % interval_ == 0) add_scalars("", e.state->iter + 1, e);
        maybe_flush();
        break;
      case RH_EVENT_AFTER_VAL_EPOCH:
        add_scalars("val/", e.state->iter, e);  // iterations done
        flush();
        break;
      case RH_EVENT_AFTER_TEST_EPOCH:
        add_scalars("test/", e.state->iter, e);
        flush();
        break;
      case RH_EVENT_AFTER_TRAIN_EPOCH:
      case RH_EVENT_AFTER_SAVE_CHECKPOINT:
      case RH_EVENT_AFTER_RUN:
        flush();
        break;
      default:
        break;
    }
  }

 private:
  void add_scalars(const char* prefix, int64_t step, const rh_HookEventArgs& e) {
    if (e.num_metrics == 0) return;
    tensorboard::Event event;
    event.set_wall_time(unix_seconds());
    event.set_step(step);
    tensorboard::Summary* summary = event.mutable_summary();
    for (size_t i = 0; i < e.num_metrics; ++i) {
      tensorboard::Summary::Value* value = summary->add_value();
      value->set_tag(prefix + std::string(e.metrics[i].name.data, e.metrics[i].name.size));
      value->set_simple_value(static_cast<float>(e.metrics[i].value));
    }
    add_event(event);
  }

  void add_event(const tensorboard::Event& event) {
    std::string data;
    if (!event.SerializeToString(&data))
      throw rh::Exception(RH_ERROR_INTERNAL,
                          "tensorboard: cannot serialize an event for " + path_.string());
    append_record(buffer_, data);
  }

  void maybe_flush() {
    const auto since = std::chrono::steady_clock::now() - last_flush_;
    if (buffer_.size() >= kMaxBufferedBytes ||
        std::chrono::duration<double>(since).count() >= flush_secs_)
      flush();
  }

  void open_file(int32_t rank) {
    fs::path dir = log_dir_;
    if (all_ranks_) dir /= "rank" + std::to_string(rank);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) io_error(dir, "cannot create the directory", ec.value());
    const std::string base = "events.out.tfevents." + std::to_string(std::time(nullptr)) + "." +
                             host_name() + "." + std::to_string(::getpid());
    // Two writers of one process in one second (two tensorboard hooks with one
    // log_dir): the second gets a numbered name rather than a shared file.
    for (int n = 0; fd_ < 0; ++n) {
      path_ = dir / (n == 0 ? base : base + "." + std::to_string(n));
      fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
      if (fd_ < 0 && errno != EEXIST) io_error(path_, "cannot create", errno);
    }
    tensorboard::Event first;
    first.set_wall_time(unix_seconds());
    first.set_file_version("brain.Event:2");
    first.mutable_source_metadata()->set_writer("runner-host");
    add_event(first);
    flush();  // a valid event file from the start, for a TensorBoard already watching
  }

  void flush() {
    last_flush_ = std::chrono::steady_clock::now();
    const char* p = buffer_.data();
    size_t left = buffer_.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        io_error(path_, "write failed", errno);
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    buffer_.clear();
  }

  [[noreturn]] static void io_error(const fs::path& path, const std::string& what, int err) {
    throw rh::Exception(RH_ERROR_IO,
                        "tensorboard: " + path.string() + ": " + what + ": " + std::strerror(err));
  }

  const rh_HostApi* host_;
  rh_Context* context_;
  fs::path log_dir_;
  fs::path path_;  // the event file, once open
  int64_t interval_ = 1;
  double flush_secs_ = 120.0;
  bool all_ranks_ = false;
  int fd_ = -1;
  std::string buffer_;  // whole records not yet written
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
};

const rh_Component kComponents[] = {
    rh::hook_component<TensorboardHook>(
        "tensorboard",
        "writes every reported scalar to TensorBoard event files (work_dir/tensorboard)"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_hook_tensorboard", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
