// Throughput and memory figures added to every train iteration's metrics
// (Runner's train loop): samples/s or tokens/s per rank and for the job,
// peak and current resident memory, and CUDA allocator figures on a GPU.
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rh::lifecycle {

class IterationMetrics {
 public:
  IterationMetrics();
  ~IterationMetrics();
  IterationMetrics(const IterationMetrics&) = delete;
  IterationMetrics& operator=(const IterationMetrics&) = delete;

  // `items`: samples (or tokens, `tokens` true) this rank processed in an
  // iteration of `seconds`; `world_size` ranks run in lockstep (every step
  // waits for every rank's gradients), so the job's rate is this rank's x
  // world_size.
  void add(std::vector<std::pair<std::string, double>>& metrics, int64_t items, bool tokens,
           double seconds, int world_size, c10::Device device);
  // Peak resident memory (getrusage's ru_maxrss), MB; -1 when unknown.
  double peak_rss_mb();

 private:
  double current_rss_mb();
  void read_memory();

  int statm_fd_ = -1;  // /proc/self/statm, kept open: one pread per reading
  long page_size_ = 4096;
  double rss_mb_ = 0;
  double peak_rss_mb_ = 0;
  std::chrono::steady_clock::time_point memory_read_at_{};
};

}  // namespace rh::lifecycle
