// WorkerProcesses — the launcher's workers as processes (internal to
// host/launch): each started with fork + exec in a process group of its own
// (stdin from /dev/null, stdout and stderr through pipes, PR_SET_PDEATHSIG
// SIGKILL, the signal dispositions the launcher's caller had), signalled
// through its group, and reaped only after whatever is left in its group is
// SIGKILLed, so that a reaped worker's id, which may name another group
// then, is never signalled. Every worker still running when the object goes
// (an exception) is killed and reaped: nothing outlives the launcher.
//
// What to do when a worker ends, or when the launcher gets a signal (the
// first failure, SIGTERM to the others, the grace period), is the
// Supervisor's, in Launcher.cpp.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/WorkerOutput.hpp"

namespace rh::launch::detail {

class SignalScope;

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;  // started and not reaped yet
  std::string prefix;    // "[rank N] "
  Stream out;
  Stream err;
};

// Why a worker could not be started: the launcher's message ("cannot start
// rank N: ...") and the exit code the run ends with for it.
struct StartFailure {
  int code = 0;
  std::string message;
};

class WorkerProcesses {
 public:
  // The workers' output goes to `out` and `err`; `signals` says which
  // signals the launcher's caller ignored (so do the workers).
  WorkerProcesses(const SignalScope& signals, Output& out, Output& err)
      : signals_(signals), out_(out), err_(err) {}
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  // worker_argv[0] as a path execve accepts: itself when it has a '/', else
  // the first executable of that name on PATH.
  static std::string resolve_program(const std::string& program);

  // Starts rank `rank` (local rank `local_rank`): `program` with `argv` and
  // the environment `env`; `keep_fd` (>= 0), a close-on-exec descriptor of
  // the launcher's, stays open in it (the launch gate's). A worker whose
  // execve failed was started (it exits 127 and is reaped as the others)
  // and is reported as a failure.
  std::optional<StartFailure> start(int local_rank, int rank, const std::string& program,
                                    std::vector<std::string> argv, std::vector<std::string> env,
                                    int keep_fd = -1);

  // Reaps the workers that ended, each after its group is SIGKILLed and its
  // last output emitted; `ended` gets each one with its exit code (128 + S
  // for a signal) and what happened ("exited with code C", "killed by
  // signal S (SIGNAME)").
  void reap(const std::function<void(const Worker&, int code, const std::string& what)>& ended);

  bool any_running() const;
  // Sends `sig` to every running worker's process group.
  void signal_all(int sig);
  // SIGKILLs every running worker's group and the worker itself (in case it
  // left its group); `before` is told of each one first.
  void kill_all(const std::function<void(const Worker&)>& before);

  // Appends the workers' open output pipes to `fds` (for poll()), and reads
  // those that poll() marked (`polled`: the entries appended, in order).
  void add_poll_fds(std::vector<pollfd>& fds);
  void read_polled(const pollfd* polled);

  // Once every worker is reaped: what is left in the pipes, emitted, and the
  // pipes closed.
  void drain();

 private:
  const SignalScope& signals_;
  Output& out_;
  Output& err_;
  std::vector<Worker> workers_;
  std::vector<std::pair<Stream*, const std::string*>> polled_;  // add_poll_fds' streams
};

}  // namespace rh::launch::detail
