#include "launch/LaunchRendezvous.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

#include "launch/Launcher.hpp"
#include "launch/WorkerEnv.hpp"

namespace rh::launch {
namespace {

// The addresses `addr` resolves to, for bind(); throws std::runtime_error
// when it cannot be resolved.
std::unique_ptr<addrinfo, void (*)(addrinfo*)> resolve_for_bind(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int gai = getaddrinfo(addr.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (gai != 0)
    throw std::runtime_error("cannot resolve master address '" + addr + "': " + gai_strerror(gai));
  return {found, freeaddrinfo};
}

int bound_port(int fd) {
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) return -1;
  if (bound.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  if (bound.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
  return -1;
}

// A socket of `ai` with SO_REUSEADDR bound to its address, or -1 (errno set).
int bind_reusable(const addrinfo* ai) {
  const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return -1;
  const int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    const int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

PortReservation::~PortReservation() {
  if (fd_ >= 0) close(fd_);
}

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), port_(std::exchange(other.port_, 0)) {}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    port_ = std::exchange(other.port_, 0);
  }
  return *this;
}

PortReservation PortReservation::free_port(const std::string& addr) {
  auto found = resolve_for_bind(addr, 0);
  std::string last_error = "no address";
  for (const addrinfo* ai = found.get(); ai != nullptr; ai = ai->ai_next) {
    const int fd = bind_reusable(ai);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    const int port = bound_port(fd);
    if (port <= 0) {
      last_error = std::strerror(errno);
      close(fd);
      continue;
    }
    PortReservation r;
    r.fd_ = fd;
    r.port_ = port;
    return r;
  }
  throw std::runtime_error("cannot bind a free port on master address '" + addr +
                           "': " + last_error);
}

PortReservation PortReservation::given_port(const std::string& addr, int port, bool& taken) {
  taken = false;
  PortReservation r;
  r.port_ = port;
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> found{nullptr, freeaddrinfo};
  try {
    found = resolve_for_bind(addr, port);
  } catch (const std::runtime_error&) {
    return r;  // rank 0's store says what is wrong with the address
  }
  for (const addrinfo* ai = found.get(); ai != nullptr; ai = ai->ai_next) {
    const int fd = bind_reusable(ai);
    if (fd >= 0) {
      r.fd_ = fd;
      return r;
    }
    if (errno == EADDRINUSE) {
      taken = true;
      return r;
    }
  }
  return r;  // not an address of this host (EADDRNOTAVAIL), or no socket: not ours to judge
}

int pick_free_port(const std::string& addr) { return PortReservation::free_port(addr).port(); }

Rendezvous settle_rendezvous(const LaunchOptions& options) {
  Rendezvous r;
  r.port = options.master_port;
  r.port_from = options.master_port_from.empty() ? "--master-port" : options.master_port_from;
  if (r.port == 0) {
    try {
      r.reservation = PortReservation::free_port(options.master_addr);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument("a free port for the rendezvous (port 0, from " + r.port_from +
                                  "): " + e.what());
    }
    r.port = r.reservation.port();
    r.port_from = "the launcher, which picked a free port";
  } else if (options.node_rank == 0) {
    bool taken = false;
    r.reservation = PortReservation::given_port(options.master_addr, r.port, taken);
    if (taken)
      throw std::invalid_argument(
          "port " + std::to_string(r.port) + " on " + options.master_addr + " (from " +
          r.port_from +
          ") is taken: another job's rendezvous store, or another program, listens on it. Give "
          "this job a port of its own with --master-port PORT (or MASTER_PORT, or "
          "dist.master_port in the job); on one node, leave them all unset and the launcher "
          "picks a free port");
  }
  r.job_id = options.job_id;
  if (r.job_id.empty()) {
    const char* given = std::getenv("RH_JOB_ID");
    if (given != nullptr && *given != '\0')
      r.job_id = given;
    else if (options.nnodes == 1)
      r.job_id = random_job_id();
    else  // every node's launcher must arrive at the same id
      r.job_id =
          job_id_from("runner-host launcher, " + std::to_string(options.nnodes) + " nodes x " +
                      std::to_string(options.nproc_per_node) + " ranks, rendezvous at " +
                      options.master_addr + ":" + std::to_string(r.port));
  }
  return r;
}

}  // namespace rh::launch
