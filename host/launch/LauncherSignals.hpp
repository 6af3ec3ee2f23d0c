// The launcher's signals (internal to host/launch): which ones it forwards to
// its workers and which of those end them, the handler scope that turns each
// received signal into a byte on a self-pipe for the supervision loop's
// poll(), the mask held across fork(), and signal names for its messages.
// What the launcher does with a signal (forward, grace period, Ctrl-C twice)
// is the Supervisor's, in Launcher.cpp.
#pragma once

#include <signal.h>

#include <string>
#include <vector>

namespace rh::launch::detail {

// The signals the launcher forwards to its workers. SLURM's `--signal` warns of
// preemption with SIGUSR1/SIGUSR2 (or SIGQUIT), so they must reach the workers.
inline constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

// Whether a forwarded signal asks the workers to end: it starts the grace
// period after which those left are killed. SIGUSR1/SIGUSR2 only warn (a
// worker saves a checkpoint and ends on its own, which is then a failure).
inline bool is_terminating(int sig) { return sig != SIGUSR1 && sig != SIGUSR2; }

// The signals whose disposition a worker gets as the launcher's caller had it
// (ignored stays ignored, anything else is the default): the forwarded ones,
// SIGCHLD, and SIGPIPE, which the launcher itself ignores.
inline constexpr int kResetInWorker[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                         SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};

// "SIGTERM", "SIGKILL", ...; "signal N" for the others.
std::string signal_name(int sig);

// Installs the launcher's signal handling for the duration of launch() and
// restores the previous one afterwards: the forwarded signals (but those the
// caller ignores) and SIGCHLD are written to a self-pipe, SIGPIPE is ignored.
class SignalScope {
 public:
  SignalScope();  // throws std::runtime_error when the pipe cannot be made
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  // Readable when a signal came (poll it).
  int read_fd() const { return read_fd_; }
  // What a worker starts with for `sig` (one of kResetInWorker): ignored if
  // the launcher's caller ignored it, the default otherwise.
  bool was_ignored(int sig) const { return old_[sig].sa_handler == SIG_IGN; }

  // The signals received since the last call, in order.
  std::vector<int> take();

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction old_[NSIG] {};
};

// Blocks the launcher's signals while a worker is forked, so that no handler
// runs in the child before exec.
class BlockSignals {
 public:
  BlockSignals();
  ~BlockSignals();
  BlockSignals(const BlockSignals&) = delete;
  BlockSignals& operator=(const BlockSignals&) = delete;
  const sigset_t& old_mask() const { return old_; }

 private:
  sigset_t old_{};
};

}  // namespace rh::launch::detail
