#include "lifecycle/IterationMetrics.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#ifdef RH_WITH_C10_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace rh::lifecycle {
namespace {

// Current RSS is read at most this often: a pread of /proc/self/statm on a
// kept descriptor costs ~2 us (measured, 2-core VM), 0.2% of the fastest
// step we have (the quickstart's ~1 ms); a figure at most 0.1 s old is
// as good for a memory curve.
constexpr std::chrono::milliseconds kRssPeriod{100};

}  // namespace

IterationMetrics::IterationMetrics() {
  statm_fd_ = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) page_size_ = page;
}

IterationMetrics::~IterationMetrics() {
  if (statm_fd_ >= 0) ::close(statm_fd_);
}

double IterationMetrics::current_rss_mb() {
  const auto now = std::chrono::steady_clock::now();
  if (rss_read_at_ != std::chrono::steady_clock::time_point{} && now - rss_read_at_ < kRssPeriod)
    return rss_mb_;
  rss_read_at_ = now;
  char buf[128];
  const ssize_t n = statm_fd_ < 0 ? -1 : ::pread(statm_fd_, buf, sizeof buf - 1, 0);
  if (n <= 0) return rss_mb_ = -1;  // no /proc: reported as -1, never a made-up figure
  buf[n] = '\0';
  // "size resident shared ...", in pages.
  char* end = nullptr;
  std::strtol(buf, &end, 10);
  const long resident = std::strtol(end, nullptr, 10);
  return rss_mb_ =
             static_cast<double>(resident) * static_cast<double>(page_size_) / (1024.0 * 1024.0);
}

void IterationMetrics::add(std::vector<std::pair<std::string, double>>& metrics, int64_t items,
                           bool tokens, double seconds, int world_size, c10::Device device) {
  const double rate = seconds > 0 ? static_cast<double>(items) / seconds : 0.0;
  metrics.emplace_back(tokens ? "tokens_per_s" : "samples_per_s", rate);
  metrics.emplace_back(tokens ? "job_tokens_per_s" : "job_samples_per_s", rate * world_size);
  metrics.emplace_back("rss_mb", current_rss_mb());
#ifdef RH_WITH_C10_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    constexpr size_t kAll =
        static_cast<size_t>(c10::cuda::CUDACachingAllocator::StatType::AGGREGATE);
    metrics.emplace_back(
        "cuda_allocated_mb",
        static_cast<double>(stats.allocated_bytes[kAll].current) / (1024.0 * 1024.0));
    metrics.emplace_back(
        "cuda_reserved_mb",
        static_cast<double>(stats.reserved_bytes[kAll].current) / (1024.0 * 1024.0));
  }
#else
  (void)device;  // a CPU-only LibTorch: no CUDA figures
#endif
}

}  // namespace rh::lifecycle
