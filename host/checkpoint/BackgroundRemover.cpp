#include "checkpoint/BackgroundRemover.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <system_error>
#include <utility>

#include "common/FaultInjection.hpp"

namespace fs = std::filesystem;

namespace rh::checkpoint {

BackgroundRemover::~BackgroundRemover() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BackgroundRemover::remove(fs::path dir, std::string what) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(dir), std::move(what)});
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  changed_.notify_all();
}

void BackgroundRemover::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void BackgroundRemover::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_, and nothing left to remove
    const Job job = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::error_code ec;
    // Tests only: a removal that takes a while, or one that fails.
    if (common::fault_injected("ckpt_remove:slow"))
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (common::fault_injected("ckpt_remove:fail"))
      ec = std::make_error_code(std::errc::permission_denied);
    else
      fs::remove_all(job.dir, ec);
    if (ec)
      spdlog::warn("cannot remove {} ({}): {}; the next save of that name removes it",
                   job.dir.string(), job.what, ec.message());
    lock.lock();
    busy_ = false;
    changed_.notify_all();
  }
}

}  // namespace rh::checkpoint
