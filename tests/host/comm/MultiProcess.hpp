// Runs a function in N forked processes (one per rank) that rendezvous on
// 127.0.0.1 at a free port, and collects their exit codes. A rank reports a
// failed check by throwing (Check); its message goes to stderr with the rank.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "comm/Communicator.hpp"

namespace rh::test {

// A port nobody listens on right now (bind to port 0 and read it back).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind() failed");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

struct RankContext {
  int rank;
  int world_size;
  int port;
  // Options for create_world on this rank (gloo, 127.0.0.1, timeout 10 s).
  comm::RendezvousOptions options(double timeout_s = 10) const {
    comm::RendezvousOptions o;
    o.master_addr = "127.0.0.1";
    o.master_port = port;
    o.rank = rank;
    o.world_size = world_size;
    o.local_rank = rank;
    o.timeout_s = timeout_s;
    return o;
  }
};

// Throws (failing the rank) when `ok` is false.
inline void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("check failed: " + what);
}

// The limit below catches a hang, not a speed: a sanitized build runs
// several times slower (ThreadSanitizer 5-15x; GlooCommunicatorTest's 3
// ranks of 7 M-element reductions on 2 cores took over 20 s under it), so
// the limit grows with it.
#if defined(__SANITIZE_THREAD__)
constexpr double kSanitizerSlowdown = 8;
#elif defined(__SANITIZE_ADDRESS__)
constexpr double kSanitizerSlowdown = 3;
#else
constexpr double kSanitizerSlowdown = 1;
#endif

// Forks `n` ranks running `body` (its return value is the exit code; an
// exception exits with 99 after printing it). Returns the exit codes (a rank
// killed by a signal or after `limit_s` (x kSanitizerSlowdown) gives 128 +
// signal).
inline std::vector<int> run_ranks(int n, const std::function<int(const RankContext&)>& body,
                                  double limit_s = 20) {
  limit_s *= kSanitizerSlowdown;
  const int port = free_port();
  std::vector<pid_t> pids;
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < n; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork() failed");
    if (pid == 0) {
      int code = 0;
      try {
        code = body(RankContext{r, n, port});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] %s\n", r, e.what());
        code = 99;
      } catch (...) {
        std::fprintf(stderr, "[rank %d] unknown exception\n", r);
        code = 98;
      }
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(static_cast<size_t>(n), -1);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int>(limit_s * 1000));
  size_t left = pids.size();
  while (left > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -1) continue;
      int status = 0;
      pid_t done = ::waitpid(pids[i], &status, WNOHANG);
      if (done == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (codes[i] != -1) continue;
        std::fprintf(stderr, "[rank %zu] still running after %g s: killed\n", i, limit_s);
        ::kill(pids[i], SIGKILL);
        int status = 0;
        ::waitpid(pids[i], &status, 0);
        codes[i] = 128 + SIGKILL;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return codes;
}

}  // namespace rh::test
