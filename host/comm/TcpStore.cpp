#include "comm/TcpStore.hpp"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <atomic>
#include <cstdlib>

#include "abi/HostError.hpp"

// TCPStoreOptions::useLibUV exists from LibTorch 2.1 (default false until
// 2.3, true from 2.4).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define RH_TCPSTORE_HAS_LIBUV_OPTION 1
#endif

namespace rh::comm {

#ifdef RH_TCPSTORE_HAS_LIBUV_OPTION
namespace {

// Whether this LibTorch has the libuv backend: -1 not asked yet, 0 no, 1 yes.
// A property of the library, so asked once per process.
std::atomic<int> g_has_libuv{-1};

bool refuses_libuv(const c10::Error& e) {
  return std::string(e.what_without_backtrace()).find("libuv") != std::string::npos;
}

}  // namespace
#endif

c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(const std::string& host,
                                                  c10d::TCPStoreOptions opts,
                                                  std::string* backend) {
#ifdef RH_TCPSTORE_HAS_LIBUV_OPTION
  const char* env = std::getenv("USE_LIBUV");
  const std::string asked = env == nullptr ? "" : env;
  if (!asked.empty() && asked != "1") {  // PyTorch's rule: libuv only for "1"
    opts.useLibUV = false;
    if (backend) *backend = "classic (USE_LIBUV=" + asked + ")";
    return c10::make_intrusive<c10d::TCPStore>(host, opts);
  }
  if (asked.empty() && g_has_libuv.load() == 0) {
    opts.useLibUV = false;
    if (backend) *backend = "classic (this LibTorch " TORCH_VERSION " was built without libuv)";
    return c10::make_intrusive<c10d::TCPStore>(host, opts);
  }
  opts.useLibUV = true;
  try {
    auto store = c10::make_intrusive<c10d::TCPStore>(host, opts);
    g_has_libuv.store(1);
    if (backend) *backend = "libuv";
    return store;
  } catch (const c10::Error& e) {
    if (!refuses_libuv(e)) throw;
    g_has_libuv.store(0);
    if (asked == "1")
      throw host::HostError(
          RH_ERROR_FAILED_PRECONDITION,
          "USE_LIBUV=" + asked + " asks for c10d's libuv store, but this LibTorch (" +
              TORCH_VERSION + ") was built without libuv: unset USE_LIBUV, or set USE_LIBUV=0");
  }
  opts.useLibUV = false;
  if (backend) *backend = "classic (this LibTorch " TORCH_VERSION " was built without libuv)";
  return c10::make_intrusive<c10d::TCPStore>(host, opts);
#else
  if (backend) *backend = "classic (LibTorch " TORCH_VERSION " has no other)";
  return c10::make_intrusive<c10d::TCPStore>(host, opts);
#endif
}

}  // namespace rh::comm
