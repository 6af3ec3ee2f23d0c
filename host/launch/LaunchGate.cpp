#include "launch/LaunchGate.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "launch/WorkerOutput.hpp"

namespace rh::launch {

using detail::above_stdio;
using detail::close_fd;
using detail::set_nonblocking;
using detail::write_all;

// ---- The worker's side -------------------------------------------------------------

WorkerGate WorkerGate::from_env() {
  WorkerGate gate;
  const char* value = std::getenv(kLaunchGateEnv);
  if (value == nullptr) return gate;
  const std::string v(value);
  ::unsetenv(kLaunchGateEnv);
  const size_t colon = v.find(':');
  if (colon == std::string::npos) return gate;
  const std::string role = v.substr(0, colon);
  char* end = nullptr;
  const long fd = std::strtol(v.c_str() + colon + 1, &end, 10);
  if (end == v.c_str() + colon + 1 || *end != '\0' || fd < 3 || fd > 65535) return gate;
  if (fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC) != 0) return gate;  // not open
  gate.fd_ = static_cast<int>(fd);
  gate.role_ = role == "check" ? Role::Check : role == "wait" ? Role::Wait : Role::None;
  if (gate.role_ == Role::None) close_fd(gate.fd_);
  return gate;
}

bool WorkerGate::wait_until_open() {
  if (role_ != Role::Wait) return true;
  char c = 0;
  ssize_t n;
  while ((n = ::read(fd_, &c, 1)) < 0 && errno == EINTR) {
  }
  close_fd(fd_);
  role_ = Role::None;
  return n == 1;
}

void WorkerGate::pass() {
  if (role_ != Role::Check) return;
  write_all(fd_, "P");
  close_fd(fd_);
  role_ = Role::None;
}

void WorkerGate::refuse(const std::string& text) {
  if (role_ != Role::Check) return;
  write_all(fd_, "R" + text);
  close_fd(fd_);
  role_ = Role::None;
}

// ---- The launcher's side -----------------------------------------------------------

bool LauncherGate::make() {
  int verdict[2], go[2];
  if (pipe2(verdict, O_CLOEXEC) != 0) return false;
  if (pipe2(go, O_CLOEXEC) != 0) {
    ::close(verdict[0]);
    ::close(verdict[1]);
    return false;
  }
  verdict_read_ = above_stdio(verdict[0]);
  verdict_write_ = above_stdio(verdict[1]);
  go_read_ = above_stdio(go[0]);
  go_write_ = above_stdio(go[1]);
  if (verdict_read_ < 0 || verdict_write_ < 0 || go_read_ < 0 || go_write_ < 0) return false;
  // Read from the supervision's poll loop, which must not block on it.
  set_nonblocking(verdict_read_);
  return true;
}

LauncherGate::~LauncherGate() {
  for (int* fd : {&verdict_read_, &verdict_write_, &go_read_, &go_write_}) close_fd(*fd);
}

std::string LauncherGate::env_entry(int local_rank) const {
  return std::string(kLaunchGateEnv) + "=" + (local_rank == 0 ? "check:" : "wait:") +
         std::to_string(worker_fd(local_rank));
}

int LauncherGate::worker_fd(int local_rank) const {
  return local_rank == 0 ? verdict_write_ : go_read_;
}

void LauncherGate::started() {
  close_fd(verdict_write_);
  close_fd(go_read_);
}

void LauncherGate::read(int waiters, bool block) {
  while (state_ == State::Pending) {
    char buf[4096];
    const ssize_t n = ::read(verdict_read_, buf, sizeof buf);
    if (n > 0) {
      received_.append(buf, static_cast<size_t>(n));
      if (received_[0] == 'P') {
        open(waiters);
        return;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!block) return;
      pollfd p{verdict_read_, POLLIN, 0};
      // Rank 0 has ended and its group was killed: the write end closes
      // with it; a second is the bound should a descendant have kept it
      // (then the gate is closed without a verdict).
      if (::poll(&p, 1, 1000) <= 0) {
        state_ = State::Closed;
        close_go();
        close_fd(verdict_read_);
      }
      continue;
    }
    // End of file: rank 0 closed it after its verdict, or ended without one.
    if (!received_.empty() && received_[0] == 'R') {
      refusal_ = received_.substr(1);
      state_ = State::Refused;
    } else {
      state_ = State::Closed;
    }
    close_go();
    close_fd(verdict_read_);
  }
}

void LauncherGate::open(int waiters) {
  // One byte per waiter fits in any pipe: no block; a waiter that died
  // leaves it unread (and SIGPIPE is ignored while launch() runs).
  write_all(go_write_, std::string(static_cast<size_t>(waiters > 0 ? waiters : 0), 'G'));
  close_go();
  close_fd(verdict_read_);
  state_ = State::Open;
}

void LauncherGate::close_go() { close_fd(go_write_); }

}  // namespace rh::launch
