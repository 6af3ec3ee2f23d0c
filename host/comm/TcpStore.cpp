#include "comm/TcpStore.hpp"

#include <arpa/inet.h>
#include <c10/util/Exception.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <torch/version.h>

#include <atomic>
#include <cstdlib>
#include <set>

#include "abi/HostError.hpp"

// TCPStoreOptions::useLibUV exists from LibTorch 2.1 (default false until
// 2.3, true from 2.4).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define RH_TCPSTORE_HAS_LIBUV_OPTION 1
#endif

namespace rh::comm {
namespace {

// This process's open file descriptors, but the one that lists them (the
// lowest free one: the next socket may take it).
std::set<int> open_fds() {
  std::set<int> out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && fd != ::dirfd(dir))
      out.insert(static_cast<int>(fd));
  }
  ::closedir(dir);
  return out;
}

// The client's side of a new store: every TCP socket opened since `before`
// whose peer's port is the store's gets receive and send timeouts of
// `timeout`, as LibTorch 1.13's client set them itself. c10d's client
// keeps its socket private; its requests are blocking reads and writes on
// it, which then fail (EAGAIN) once the store has been silent that long.
void bound_requests(const std::set<int>& before, int port, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  for (int fd : open_fds()) {
    if (before.count(fd) != 0) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    int peer_port = -1;
    if (peer.ss_family == AF_INET)
      peer_port = ntohs(reinterpret_cast<const sockaddr_in*>(&peer)->sin_port);
    else if (peer.ss_family == AF_INET6)
      peer_port = ntohs(reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_port);
    if (peer_port != port) continue;
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
}

}  // namespace

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

namespace {

c10::intrusive_ptr<c10d::TCPStore> make_unbounded(const std::string& host,
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

}  // namespace

c10::intrusive_ptr<c10d::TCPStore> make_tcp_store(
    const std::string& host, c10d::TCPStoreOptions opts, std::string* backend,
    std::optional<std::chrono::milliseconds> request_timeout) {
  const std::set<int> before = open_fds();
  auto store = make_unbounded(host, opts, backend);
  bound_requests(before, store->getPort(), request_timeout.value_or(opts.timeout));
  return store;
}

}  // namespace rh::comm
