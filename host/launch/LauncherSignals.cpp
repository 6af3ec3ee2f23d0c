#include "launch/LauncherSignals.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace rh::launch::detail {
namespace {

// The self-pipe: the signal handler writes each signal number to it and the
// poll loop reads them. -1 outside launch().
volatile sig_atomic_t g_signal_pipe_write = -1;

void on_signal(int sig) {
  const int saved = errno;
  const int fd = g_signal_pipe_write;
  if (fd >= 0) {
    const unsigned char byte = static_cast<unsigned char>(sig);
    ssize_t n = write(fd, &byte, 1);  // a full pipe drops the byte: nothing to do then
    (void)n;
  }
  errno = saved;
}

}  // namespace

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "signal " + std::to_string(sig);
  }
}

SignalScope::SignalScope() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::runtime_error(std::string("runner-host launcher: pipe: ") + std::strerror(errno));
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  g_signal_pipe_write = write_fd_;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : kForwarded) {
    // A signal the caller ignores (nohup, a background job's SIGINT) stays
    // ignored, by the launcher and by the workers.
    sigaction(sig, nullptr, &old_[sig]);
    if (old_[sig].sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr);
  }
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  sigaction(SIGCHLD, &sa, &old_[SIGCHLD]);
  // A write to a closed stdout (`runner-host ... | head`) must fail with
  // EPIPE, not kill the launcher and with it (PR_SET_PDEATHSIG) the workers.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, &old_[SIGPIPE]);
}

SignalScope::~SignalScope() {
  for (int sig : kForwarded) sigaction(sig, &old_[sig], nullptr);
  sigaction(SIGCHLD, &old_[SIGCHLD], nullptr);
  sigaction(SIGPIPE, &old_[SIGPIPE], nullptr);
  g_signal_pipe_write = -1;
  close(read_fd_);
  close(write_fd_);
}

std::vector<int> SignalScope::take() {
  std::vector<int> sigs;
  unsigned char buf[64];
  ssize_t n;
  while ((n = read(read_fd_, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
    for (ssize_t i = 0; i < n; ++i) sigs.push_back(buf[i]);
  return sigs;
}

BlockSignals::BlockSignals() {
  sigset_t block;
  sigemptyset(&block);
  for (int sig : kForwarded) sigaddset(&block, sig);
  sigaddset(&block, SIGCHLD);
  sigprocmask(SIG_BLOCK, &block, &old_);
}

BlockSignals::~BlockSignals() { sigprocmask(SIG_SETMASK, &old_, nullptr); }

}  // namespace rh::launch::detail
