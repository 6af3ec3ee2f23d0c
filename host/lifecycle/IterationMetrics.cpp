#include "lifecycle/IterationMetrics.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#ifdef RH_WITH_C10_CUDA
#include "rh/cpp/torch_compat.hpp"  // c10/cuda/CUDACachingAllocator.h, kCudaStatAggregate
#endif

namespace rh::lifecycle {
namespace {

// Memory is read at most this often: each figure costs a system call, ~1-2
// us on the development VM (a pread of /proc/self/statm on a kept
// descriptor, a getrusage), up to 0.4% of the quickstart's 0.45 ms step; a
// figure at most 0.1 s old is as good for a memory curve.
constexpr std::chrono::milliseconds kMemoryPeriod{100};

}  // namespace

IterationMetrics::IterationMetrics() {
  statm_fd_ = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) page_size_ = page;
}

IterationMetrics::~IterationMetrics() {
  if (statm_fd_ >= 0) ::close(statm_fd_);
}

void IterationMetrics::read_memory() {
  const auto now = std::chrono::steady_clock::now();
  if (memory_read_at_ != std::chrono::steady_clock::time_point{} &&
      now - memory_read_at_ < kMemoryPeriod)
    return;
  memory_read_at_ = now;
  struct rusage usage {};
  peak_rss_mb_ = ::getrusage(RUSAGE_SELF, &usage) == 0
                     ? static_cast<double>(usage.ru_maxrss) / 1024.0  // KiB on Linux
                     : -1;
  char buf[128];
  const ssize_t n = statm_fd_ < 0 ? -1 : ::pread(statm_fd_, buf, sizeof buf - 1, 0);
  if (n <= 0) {
    rss_mb_ = -1;  // no /proc: reported as -1, never a made-up figure
    return;
  }
  buf[n] = '\0';
  // "size resident shared ...", in pages.
  char* end = nullptr;
  std::strtol(buf, &end, 10);
  const long resident = std::strtol(end, nullptr, 10);
  rss_mb_ = static_cast<double>(resident) * static_cast<double>(page_size_) / (1024.0 * 1024.0);
}

double IterationMetrics::peak_rss_mb() {
  read_memory();
  return peak_rss_mb_;
}

double IterationMetrics::current_rss_mb() {
  read_memory();
  return rss_mb_;
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
    constexpr size_t kAll = rh::compat::kCudaStatAggregate;
    metrics.emplace_back(
        "cuda_allocated_mb",
        static_cast<double>(stats.allocated_bytes[kAll].current) / (1024.0 * 1024.0));
    metrics.emplace_back(
        "cuda_reserved_mb",
        static_cast<double>(stats.reserved_bytes[kAll].current) / (1024.0 * 1024.0));
    // The most the run has held in tensors at once (PyTorch's
    // torch.cuda.max_memory_allocated): what the GPU benchmark compares.
    metrics.emplace_back("cuda_peak_allocated_mb",
                         static_cast<double>(stats.allocated_bytes[kAll].peak) / (1024.0 * 1024.0));
  }
#else
  (void)device;  // a CPU-only LibTorch: no CUDA figures
#endif
}

}  // namespace rh::lifecycle
