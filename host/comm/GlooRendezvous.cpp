#include "comm/GlooRendezvous.hpp"

#include <arpa/inet.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "abi/HostError.hpp"

namespace rh::comm::detail {

// The local address from which the master is reached (what a peer on the
// master's network can connect to); the host name when that fails.
std::string local_address_towards(const std::string& master_addr, int master_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  std::string port = std::to_string(master_port);
  if (getaddrinfo(master_addr.c_str(), port.c_str(), &hints, &found) == 0 && found != nullptr) {
    std::string result;
    for (addrinfo* ai = found; ai != nullptr && result.empty(); ai = ai->ai_next) {
      int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd < 0) continue;
      sockaddr_storage local{};
      socklen_t len = sizeof(local);
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
        char text[INET6_ADDRSTRLEN] = {0};
        const void* raw =
            local.ss_family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&local)->sin_addr)
                : static_cast<const void*>(
                      &reinterpret_cast<const sockaddr_in6*>(&local)->sin6_addr);
        if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) result = text;
      }
      ::close(fd);
    }
    freeaddrinfo(found);
    if (!result.empty()) return result;
  }
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') return host;
  return "127.0.0.1";
}

std::shared_ptr<gloo::transport::Device> make_device(const RendezvousOptions& o) {
  gloo::transport::tcp::attr attr;
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0')
    attr.iface = ifname;
  else
    attr.hostname = local_address_towards(o.master_addr, o.master_port);
  try {
    return gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw host::HostError(RH_ERROR_IO, "gloo: cannot listen on " +
                                           (attr.iface.empty() ? "address " + attr.hostname
                                                               : "interface " + attr.iface) +
                                           " on rank " + std::to_string(o.rank) + ": " + e.what() +
                                           " (set GLOO_SOCKET_IFNAME to pick one)");
  }
}

}  // namespace rh::comm::detail
