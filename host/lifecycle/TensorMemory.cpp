#include "lifecycle/TensorMemory.hpp"

#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>
#include <mutex>

#ifdef RH_WITH_C10_CUDA
#include "rh/cpp/torch_compat.hpp"  // c10/cuda/CUDACachingAllocator.h, kCudaStatAggregate
#endif

namespace rh::lifecycle {
namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

// Each block is the wrapped allocator's, one alignment unit longer: the
// unit in front holds the block's size (so a free knows what to take away
// without a table and its lock), and the tensor's data starts after it,
// aligned as LibTorch aligns it. Data and context stay one pointer (a
// "simple" DataPtr, as LibTorch's own), so raw_allocate works as before.
constexpr size_t kHeader = c10::gAlignment;
static_assert(kHeader >= sizeof(size_t) && kHeader % alignof(size_t) == 0);

c10::Allocator* g_inner = nullptr;         // LibTorch's allocator, wrapped
c10::DeleterFnPtr g_inner_free = nullptr;  // its raw deleter: frees a block it made

void count_free(void* data) {
  if (data == nullptr) return;
  char* block = static_cast<char*>(data) - kHeader;
  size_t n = 0;
  std::memcpy(&n, block, sizeof n);
  g_live.fetch_sub(static_cast<int64_t>(n), std::memory_order_relaxed);
  g_inner_free(block);
}

void raise_peak(int64_t live) {
  int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live, std::memory_order_relaxed)) {
  }
}

struct CountingAllocator final : c10::Allocator {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
  // LibTorch 2.3 made allocate non-const and copy_data a duty.
  c10::DataPtr allocate(size_t n) override { return make(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override { return make(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &count_free; }

  static c10::DataPtr make(size_t n) {
    c10::DataPtr inner = g_inner->allocate(n + kHeader);
    // The wrap checked that the inner blocks are simple (data == context,
    // freed by its raw deleter): the block is ours to free from now on.
    char* block = static_cast<char*>(inner.release_context());
    std::memcpy(block, &n, sizeof n);
    raise_peak(g_live.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) +
               static_cast<int64_t>(n));
    void* data = block + kHeader;
    return {data, data, &count_free, c10::Device(c10::DeviceType::CPU)};
  }
};

std::once_flag g_once;
bool g_installed = false;

}  // namespace

bool count_cpu_tensor_memory() {
  std::call_once(g_once, [] {
    c10::Allocator* inner = c10::GetCPUAllocator();
    const c10::DeleterFnPtr free_fn = inner->raw_deleter();
    if (free_fn == nullptr) return;  // a block's free is not known from its pointer
    c10::DataPtr probe = inner->allocate(kHeader);
    if (probe.get() != probe.get_context() || probe.get_deleter() != free_fn) return;
    probe.clear();
    g_inner = inner;
    g_inner_free = free_fn;
    // Above LibTorch's own registration (priority 0), so that a later
    // registration at 0 cannot replace it unnoticed.
    // Never destroyed: LibTorch may allocate while its own statics are
    // destroyed at exit, after this file's would be.
    auto* counting = new CountingAllocator();
    c10::SetCPUAllocator(counting, /*priority=*/1);
    g_installed = c10::GetCPUAllocator() == counting;
  });
  return g_installed;
}

bool counting_cpu_tensor_memory() { return g_installed; }

int64_t cpu_tensor_bytes() { return g_live.load(std::memory_order_relaxed); }

int64_t cpu_tensor_peak_bytes() { return g_peak.load(std::memory_order_relaxed); }

void mark_cpu_tensor_peak() { g_peak.store(g_live.load(std::memory_order_relaxed)); }

int64_t tensor_bytes(c10::Device device) {
  if (device.is_cpu()) return g_installed ? cpu_tensor_bytes() : -1;
#ifdef RH_WITH_C10_CUDA
  if (device.is_cuda())
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device.index())
        .allocated_bytes[rh::compat::kCudaStatAggregate]
        .current;
#endif
  return -1;
}

}  // namespace rh::lifecycle
