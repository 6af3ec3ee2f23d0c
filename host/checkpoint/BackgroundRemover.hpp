// Deletes directories on a thread of its own: the checkpoints that
// max_keep_ckpts or a new best removes (Checkpoint_Remove). The old
// checkpoint a publish swaps out of its name is still removed in the save.
//
// Why: deleting a file that was written and fsynced frees its blocks, and
// that waits for the file system (ext4 on this project's machine: 0.3 ms
// for a 180 KB file, 75-85 ms for one of 218 MB, mostly waiting, not CPU).
// Done on the loop thread, the removal of the previous 437 MB checkpoint
// cost the loop 0.16 s after each save, more than half of the save itself.
//
// The caller first renames the directory to a temporary name
// (`<name>.tmp-<pid>-<n>`, CheckpointStore): from then on it is not a
// checkpoint for resume or the listing, and a removal cut short by a crash
// leaves a temporary that the next save of that name removes. Here only
// the files go. A failure is a warning (nothing the run needs is lost).
#pragma once

#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

namespace rh::checkpoint {

class BackgroundRemover {
 public:
  BackgroundRemover() = default;
  BackgroundRemover(const BackgroundRemover&) = delete;
  BackgroundRemover& operator=(const BackgroundRemover&) = delete;
  // Waits for every removal handed over (a run ends with its work_dir as
  // it asked for it).
  ~BackgroundRemover();

  // Queues `dir` (already renamed out of the checkpoints' names) for
  // removal; starts the thread on first use. `what` names it in a warning.
  void remove(std::filesystem::path dir, std::string what);
  // Until every removal handed over is done: before a save begins, so that
  // the space they free is there for it and no removal runs beside it.
  void wait();

 private:
  void run();

  struct Job {
    std::filesystem::path dir;
    std::string what;
  };
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  bool busy_ = false;  // the thread is removing one (taken off the queue)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace rh::checkpoint
