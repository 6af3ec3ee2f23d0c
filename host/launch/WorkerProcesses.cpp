#include "launch/WorkerProcesses.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "launch/LauncherSignals.hpp"

namespace rh::launch::detail {
namespace {

// The exit code of a worker that could not be started (as a shell's).
constexpr int kExitCannotExecute = 127;
constexpr int kExitLaunchFailed = 1;

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Sends sig to the worker's process group (the worker and what it started),
// or to the worker alone when it has no group of its own. Only for a worker
// not reaped yet: its pid, and so its group id, cannot have been reused.
void signal_worker(const Worker& w, int sig) {
  if (kill(-w.pid, sig) != 0 && errno == ESRCH) kill(w.pid, sig);
}

}  // namespace

WorkerProcesses::~WorkerProcesses() {
  // Only on an exception: nothing may outlive the launcher.
  for (auto& w : workers_) {
    if (!w.running) continue;
    signal_worker(w, SIGKILL);
  }
  // The groups were killed above, while their leaders were unreaped.
  for (auto& w : workers_) {
    if (!w.running) continue;
    int status;
    while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
    }
    w.running = false;
  }
  for (auto& w : workers_) {
    close_fd(w.out.fd);
    close_fd(w.err.fd);
  }
}

std::string WorkerProcesses::resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream in(dirs);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;  // execve fails with ENOENT and the worker reports it
}

std::optional<StartFailure> WorkerProcesses::start(int local_rank, int rank,
                                                   const std::string& program,
                                                   std::vector<std::string> argv,
                                                   std::vector<std::string> env, int keep_fd) {
  Worker& w = workers_.emplace_back();
  w.local_rank = local_rank;
  w.rank = rank;
  w.prefix = "[rank " + std::to_string(rank) + "] ";
  int out[2] = {-1, -1}, err[2] = {-1, -1}, exec_status[2] = {-1, -1};
  int devnull = above_stdio(open("/dev/null", O_RDONLY | O_CLOEXEC));
  auto close_all = [&] {
    for (int* fd : {&out[0], &out[1], &err[0], &err[1], &exec_status[0], &exec_status[1]})
      close_fd(*fd);
    close_fd(devnull);
  };
  auto make_pipe = [](int fds[2]) {
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    fds[0] = above_stdio(fds[0]);
    fds[1] = above_stdio(fds[1]);
    return fds[0] >= 0 && fds[1] >= 0;
  };
  if (devnull < 0 || !make_pipe(out) || !make_pipe(err) || !make_pipe(exec_status)) {
    const int e = errno;
    close_all();
    return StartFailure{kExitLaunchFailed,
                        "cannot start rank " + std::to_string(rank) + ": " + errno_text("pipe", e)};
  }
  std::vector<char*> cargv = c_strings(argv);
  std::vector<char*> cenv = c_strings(env);
  bool ignored[NSIG] = {};
  for (int sig : kResetInWorker) ignored[sig] = signals_.was_ignored(sig);
  const pid_t launcher = getpid();

  pid_t pid;
  {
    BlockSignals block;
    pid = fork();
    if (pid == 0) {
      // The child: async-signal-safe calls only until execve.
      auto die = [&](int e) {
        ssize_t n = write(exec_status[1], &e, sizeof(e));
        (void)n;
        _exit(kExitCannotExecute);
      };
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) die(errno);
      if (getppid() != launcher) _exit(kExitCannotExecute);  // the launcher is gone already
      setpgid(0, 0);
      if (dup2(devnull, STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0 ||
          dup2(err[1], STDERR_FILENO) < 0)
        die(errno);
      struct sigaction sa {};
      sigemptyset(&sa.sa_mask);
      for (int sig : kResetInWorker) {
        sa.sa_handler = ignored[sig] ? SIG_IGN : SIG_DFL;
        sigaction(sig, &sa, nullptr);
      }
      if (keep_fd >= 0 && fcntl(keep_fd, F_SETFD, 0) != 0) die(errno);
      sigprocmask(SIG_SETMASK, &block.old_mask(), nullptr);
      execve(program.c_str(), cargv.data(), cenv.data());
      die(errno);
    }
  }
  if (pid < 0) {
    const int e = errno;
    close_all();
    return StartFailure{kExitLaunchFailed,
                        "cannot start rank " + std::to_string(rank) + ": " + errno_text("fork", e)};
  }
  setpgid(pid, pid);  // also here, so that signals to the group reach it at once
  w.pid = pid;
  w.running = true;
  close_fd(out[1]);
  close_fd(err[1]);
  close_fd(devnull);
  w.out = Stream{out[0], &out_, {}};
  w.err = Stream{err[0], &err_, {}};
  set_nonblocking(w.out.fd);
  set_nonblocking(w.err.fd);

  // The status pipe closes on a successful execve; otherwise it carries errno.
  close_fd(exec_status[1]);
  int exec_errno = 0;
  ssize_t n;
  while ((n = read(exec_status[0], &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR) {
  }
  close_fd(exec_status[0]);
  if (n == static_cast<ssize_t>(sizeof(exec_errno)))
    return StartFailure{kExitCannotExecute, "cannot start rank " + std::to_string(rank) + ": " +
                                                errno_text("execute " + program, exec_errno)};
  return std::nullopt;
}

void WorkerProcesses::reap(
    const std::function<void(const Worker&, int code, const std::string& what)>& ended) {
  for (auto& w : workers_) {
    if (!w.running) continue;
    // Look without reaping first: while the leader is a zombie its pid, and
    // so its group id, cannot be reused, and whatever the worker left in its
    // process group goes with it. Once reaped, the id may name another group.
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(w.pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      w.running = false;  // ECHILD: someone else reaped it; its id is not ours to signal
      continue;
    }
    if (info.si_pid == 0) continue;  // still running
    kill(-w.pid, SIGKILL);
    int status = 0;
    pid_t r;
    while ((r = waitpid(w.pid, &status, 0)) < 0 && errno == EINTR) {
    }
    w.running = false;
    if (r < 0) continue;
    // Its last output first, then the verdict.
    read_stream(w.out, w.prefix);
    read_stream(w.err, w.prefix);
    int code = 0;
    std::string what;
    if (WIFEXITED(status)) {
      code = WEXITSTATUS(status);
      what = "exited with code " + std::to_string(code);
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
      what = "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
             signal_name(WTERMSIG(status)) + ")";
    }
    ended(w, code, what);
  }
}

bool WorkerProcesses::any_running() const {
  return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
}

void WorkerProcesses::signal_all(int sig) {
  for (auto& w : workers_)
    if (w.running) signal_worker(w, sig);
}

void WorkerProcesses::kill_all(const std::function<void(const Worker&)>& before) {
  for (auto& w : workers_) {
    if (!w.running) continue;
    before(w);
    signal_worker(w, SIGKILL);
    kill(w.pid, SIGKILL);  // in case it left its group
  }
}

void WorkerProcesses::add_poll_fds(std::vector<pollfd>& fds) {
  polled_.clear();
  for (auto& w : workers_)
    for (Stream* s : {&w.out, &w.err})
      if (s->fd >= 0) {
        fds.push_back({s->fd, POLLIN, 0});
        polled_.emplace_back(s, &w.prefix);
      }
}

void WorkerProcesses::read_polled(const pollfd* polled) {
  for (size_t i = 0; i < polled_.size(); ++i)
    if (polled[i].revents != 0) read_stream(*polled_[i].first, *polled_[i].second);
}

void WorkerProcesses::drain() {
  // Every worker is reaped: what is left in the pipes is all there will be
  // (whoever else still holds a write end was killed with its group).
  for (auto& w : workers_) {
    for (Stream* s : {&w.out, &w.err}) {
      if (s->fd < 0) continue;
      read_stream(*s, w.prefix);
      emit_lines(*s, w.prefix, true);
      close_fd(s->fd);
    }
  }
}

}  // namespace rh::launch::detail
