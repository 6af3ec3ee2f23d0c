// Checkpoint IO `async`: another checkpoint IO, written through on a thread
// of its own, so that training goes on while a checkpoint is written.
//
//   checkpoint_io:
//     type: async
//     inner: {type: safetensors}   # required: the checkpoint IO that writes the files
//
// The host sees SavesInBackground (ABI 1.6): it snapshots the state to CPU
// memory it owns, hands each file to Save (which only queues it here),
// and on a background thread of its own waits in Flush, then publishes the
// checkpoint (docs/architecture.md §6). This component's writer thread calls
// the inner component's Save for each queued file in order, then its Flush.
// The first error stops the queue (the files after it are not written) and
// is what Flush returns; the host fails the run with it. Loads, Verify and
// LoadSlices go straight to the inner component (after any queued write).
//
// Tests only: RH_FAULT_INJECT=async_write_delay_ms:<n> sleeps n ms before
// each file's write, so that a test's training steps overlap the write;
// RH_FAULT_INJECT=async_write_fail:<checkpoint>/<stem> fails the write of
// file <stem> of that checkpoint (RH_ERROR_IO), e.g. one rank's optimizer
// shards.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "rh/cpp/config.hpp"
#include "rh/cpp/error.hpp"
#include "rh/cpp/fault_injection.hpp"
#include "rh/cpp/plugin.hpp"

namespace {

// The value of RH_FAULT_INJECT's first entry `<name>:<value>` ("" when
// absent): async_write_delay_ms:<ms>, async_write_fail:<file stem>.
std::string injected(const std::string& name) {
  const std::vector<std::string> values = rh::fault_values(name);
  return values.empty() ? "" : values.front();
}

class AsyncCheckpointIo {
 public:
  explicit AsyncCheckpointIo(const rh_CreateArgs& args)
      : host_(args.host),
        delay_ms_(std::atoi(injected("async_write_delay_ms").c_str())),
        fail_(injected("async_write_fail")) {
    rh::Config cfg(args.host, args.config);
    const rh::Config inner = cfg.child("inner");
    if (!inner.present() || inner.kind() != RH_CONFIG_MAP)
      cfg.throw_error(
          "missing required key 'inner': the checkpoint IO that writes the files, e.g. "
          "`inner: {type: safetensors}`");
    if (!RH_STRUCT_HAS(host_, rh_HostApi, CheckpointIo_LoadSlices) ||
        host_->CheckpointIo_Create == nullptr)
      throw rh::Exception(RH_ERROR_UNIMPLEMENTED,
                          "checkpoint IO async needs a host of ABI 1.6 or later "
                          "(CheckpointIo_Create); this host is " +
                              std::to_string(host_->abi_major) + "." +
                              std::to_string(host_->abi_minor));
    rh::check(host_, host_->CheckpointIo_Create(args.context, inner.node(), &inner_));
    writer_ = std::thread([this] { write_queued(); });
  }

  ~AsyncCheckpointIo() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    writer_.join();  // finishes what is queued: the host waited in Flush anyway
    host_->CheckpointIo_Destroy(inner_);
  }
  AsyncCheckpointIo(const AsyncCheckpointIo&) = delete;
  AsyncCheckpointIo& operator=(const AsyncCheckpointIo&) = delete;

  bool saves_in_background() const { return true; }

  // Queues the file: the dict is the host's snapshot, read by the writer
  // thread until Flush returns (SavesInBackground).
  void save(const rh_CheckpointFileArgs& args) {
    if (args.dict == nullptr)
      throw rh::Exception(RH_ERROR_INVALID_ARGUMENT, "async Save: no state dict");
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(Write{rh::to_string(args.dir), rh::to_string(args.stem), args.dict});
    }
    wake_.notify_all();
  }

  // Waits until every queued file is written and the inner component
  // flushed; the first error since the last Flush.
  void flush() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
    if (error_code_ != RH_ERROR_OK) {
      const rh_ErrorCode code = std::exchange(error_code_, RH_ERROR_OK);
      throw rh::Exception(code, std::exchange(error_, {}));
    }
  }

  void load(const rh_CheckpointFileArgs& args) {
    flush();
    rh::check(host_, host_->CheckpointIo_Load(inner_, &args));
  }
  void verify(const rh_CheckpointFileArgs& args) {
    flush();
    rh::check(host_, host_->CheckpointIo_Verify(inner_, &args));
  }
  // RH_ERROR_UNIMPLEMENTED when the inner component reads whole files only:
  // the host then loads them whole.
  void load_slices(const rh_CheckpointFileArgs& args, const rh_CheckpointSlice* slices, size_t n) {
    flush();
    rh::check(host_, host_->CheckpointIo_LoadSlices(inner_, &args, slices, n));
  }

 private:
  struct Write {
    std::string dir, stem;
    rh_StateDict* dict;  // the host's snapshot
  };

  // RH_FAULT_INJECT=async_write_fail:<checkpoint>/<stem> names this write
  // (its directory is the checkpoint's temporary one, "<checkpoint>.tmp-...").
  bool injected_failure(const Write& w) const {
    if (fail_.empty()) return false;
    const size_t slash = w.dir.rfind('/');
    const std::string dir_name = slash == std::string::npos ? w.dir : w.dir.substr(slash + 1);
    return fail_ == dir_name.substr(0, dir_name.find(".tmp-")) + "/" + w.stem;
  }

  // The first error since the last Flush is the one Flush returns. With
  // mutex_ held.
  void keep_first(const rh::ErrorPtr& err) {
    if (!err || error_code_ != RH_ERROR_OK) return;
    error_code_ = err.code();
    error_ = err.message();
  }

  void write_queued() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      busy_ = true;
      while (!queue_.empty()) {
        const Write w = queue_.front();
        queue_.pop_front();
        if (error_code_ != RH_ERROR_OK) continue;  // the save already failed: write no more
        lock.unlock();
        if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
        const rh_CheckpointFileArgs args{RH_CHECKPOINT_FILE_ARGS_STRUCT_SIZE,
                                         {w.dir.data(), w.dir.size()},
                                         {w.stem.data(), w.stem.size()},
                                         w.dict};
        rh::ErrorPtr err(host_, injected_failure(w)
                                    ? rh::make_error(host_, RH_ERROR_IO,
                                                     "cannot write " + w.stem +
                                                         " (RH_FAULT_INJECT=async_write_fail)")
                                    : host_->CheckpointIo_Save(inner_, &args));
        lock.lock();
        keep_first(err);
      }
      lock.unlock();
      rh::ErrorPtr err(host_, host_->CheckpointIo_Flush(inner_));
      lock.lock();
      keep_first(err);
      busy_ = false;
      idle_.notify_all();
    }
  }

  const rh_HostApi* host_;
  const int delay_ms_;
  const std::string fail_;  // "<checkpoint>/<stem>" (tests only)
  rh_CheckpointIo* inner_ = nullptr;
  std::mutex mutex_;  // guards everything below
  std::condition_variable wake_, idle_;
  std::deque<Write> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  rh_ErrorCode error_code_ = RH_ERROR_OK;
  std::string error_;
  std::thread writer_;
};

const rh_Component kComponents[] = {
    rh::checkpoint_io_component<AsyncCheckpointIo>(
        "async",
        "writes through another checkpoint IO (inner:) on a thread of its own; the host publishes "
        "in the background"),
};

const rh_PluginInfo kInfo =
    rh::plugin_info("rh_ckpt_io_async", "0.1.0", RH_NATIVE_TAG_NONE, kComponents);

}  // namespace

RH_PLUGIN_ENTRY(kInfo)
