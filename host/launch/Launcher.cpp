#include "launch/Launcher.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace rh::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The signals the launcher forwards to its workers.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
// A line longer than this is emitted in pieces of this size.
constexpr size_t kMaxLine = 64 * 1024;
// The exit code of a worker that could not be started (as a shell's).
constexpr int kExitCannotExecute = 127;
constexpr int kExitLaunchFailed = 1;

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

std::string format_seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

// Writes all of `data` to fd; gives up silently on an error other than
// EINTR/EAGAIN (a closed terminal must not stop the supervision).
void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else {
      return;
    }
  }
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Moves fd above 0, 1 and 2 (which may be closed in the launcher, so that a
// new pipe could get one of them) and keeps it close-on-exec.
int above_stdio(int fd) {
  if (fd < 0 || fd > STDERR_FILENO) return fd;
  const int moved = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
  close(fd);
  return moved;
}

std::string errno_text(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

// One of a worker's output streams: the read end of its pipe and the bytes
// of a line not complete yet.
struct Stream {
  int fd = -1;
  int out_fd = -1;
  std::string pending;
};

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool running = false;  // started and not reaped yet
  std::string prefix;
  Stream out;
  Stream err;
};

// Sends sig to the worker's process group (the worker and what it started),
// or to the worker alone when it has no group of its own.
void signal_worker(const Worker& w, int sig) {
  if (kill(-w.pid, sig) != 0 && errno == ESRCH) kill(w.pid, sig);
}

// Emits the complete lines of s.pending (all of it when `at_eof`), each
// prefixed, in one write.
void emit_lines(Stream& s, const std::string& prefix, bool at_eof) {
  std::string text;
  size_t start = 0;
  while (start < s.pending.size()) {
    size_t nl = s.pending.find('\n', start);
    size_t end;
    if (nl != std::string::npos && nl - start <= kMaxLine) {
      end = nl;
    } else if (s.pending.size() - start >= kMaxLine) {
      end = start + kMaxLine;  // a long line, cut
    } else if (at_eof) {
      end = s.pending.size();  // the last line had no newline
    } else {
      break;
    }
    text += prefix;
    text.append(s.pending, start, end - start);
    text += '\n';
    start = end < s.pending.size() && s.pending[end] == '\n' ? end + 1 : end;
  }
  s.pending.erase(0, start);
  if (!text.empty()) write_all(s.out_fd, text);
}

// Reads what is available on s (non-blocking); at end of file flushes the last
// partial line and closes the stream.
void read_stream(Stream& s, const std::string& prefix) {
  char buf[65536];
  while (s.fd >= 0) {
    ssize_t n = read(s.fd, buf, sizeof(buf));
    if (n > 0) {
      s.pending.append(buf, static_cast<size_t>(n));
      emit_lines(s, prefix, false);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return;
    } else {  // end of file (or an error: treated alike)
      emit_lines(s, prefix, true);
      close_fd(s.fd);
    }
  }
}

// Installs the launcher's signal handling for the duration of launch() and
// restores the previous one afterwards.
class SignalScope {
 public:
  SignalScope() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error(errno_text("runner-host launcher: pipe", errno));
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
  }
  ~SignalScope() {
    for (int sig : kForwarded) sigaction(sig, &old_[sig], nullptr);
    sigaction(SIGCHLD, &old_[SIGCHLD], nullptr);
    g_signal_pipe_write = -1;
    close_fd(read_fd_);
    close_fd(write_fd_);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  int read_fd() const { return read_fd_; }
  // What a worker starts with for `sig`: ignored if the launcher's caller
  // ignored it, the default otherwise.
  bool was_ignored(int sig) const { return old_[sig].sa_handler == SIG_IGN; }

  // The signals received since the last call, in order.
  std::vector<int> take() {
    std::vector<int> sigs;
    unsigned char buf[64];
    ssize_t n;
    while ((n = read(read_fd_, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
      for (ssize_t i = 0; i < n; ++i) sigs.push_back(buf[i]);
    return sigs;
  }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  struct sigaction old_[NSIG] {};
};

// Blocks the launcher's signals while a worker is forked, so that no handler
// runs in the child before exec.
class BlockSignals {
 public:
  BlockSignals() {
    sigset_t block;
    sigemptyset(&block);
    for (int sig : kForwarded) sigaddset(&block, sig);
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &old_);
  }
  ~BlockSignals() { sigprocmask(SIG_SETMASK, &old_, nullptr); }
  BlockSignals(const BlockSignals&) = delete;
  BlockSignals& operator=(const BlockSignals&) = delete;
  const sigset_t& old_mask() const { return old_; }

 private:
  sigset_t old_{};
};

bool is_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}

// The launcher's environment less the variables it sets for each worker.
std::vector<std::string> base_environment(bool keep_omp) {
  static const char* const kOwned[] = {
      "RANK",        "WORLD_SIZE",  "LOCAL_RANK",  "LOCAL_WORLD_SIZE", "GROUP_RANK",
      "MASTER_ADDR", "MASTER_PORT", "RH_LAUNCHED", "OMP_NUM_THREADS"};
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool owned =
        std::any_of(std::begin(kOwned), std::end(kOwned), [&](const char* o) { return name == o; });
    if (owned && !(keep_omp && name == "OMP_NUM_THREADS")) continue;
    env.push_back(std::move(entry));
  }
  return env;
}

// worker_argv[0] as a path execve accepts: itself when it has a '/', else the
// first executable of that name on PATH.
std::string resolve_program(const std::string& program) {
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

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void validate(const LaunchOptions& o, const std::vector<std::string>& worker_argv) {
  auto bad = [](const std::string& what) { throw std::invalid_argument(what); };
  if (o.nproc_per_node < 1)
    bad("--nproc-per-node: expected 1 or more, got " + std::to_string(o.nproc_per_node));
  if (o.nnodes < 1) bad("--nnodes: expected 1 or more, got " + std::to_string(o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes)
    bad("--node-rank: expected 0 to " + std::to_string(o.nnodes - 1) + " (--nnodes " +
        std::to_string(o.nnodes) + "), got " + std::to_string(o.node_rank));
  if (o.master_port < 0 || o.master_port > 65535)
    bad("--master-port: expected 0 to 65535, got " + std::to_string(o.master_port));
  if (o.master_port == 0 && o.nnodes > 1)
    bad("--master-port 0 (pick a free port) needs --nnodes 1: every node must be given the "
        "same port");
  if (o.master_addr.empty()) bad("--master-addr: empty");
  if (worker_argv.empty()) bad("no worker command");
  if (!(o.kill_grace_s >= 0)) bad("kill_grace_s: expected 0 or more");
}

class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, SignalScope& signals) : o_(o), signals_(signals) {}

  ~Supervisor() {
    // Only on an exception: nothing may outlive the launcher.
    for (auto& w : workers_) {
      if (!w.running) continue;
      signal_worker(w, SIGKILL);
    }
    for (auto& w : workers_) {
      if (!w.running) continue;
      int status;
      while (waitpid(w.pid, &status, 0) < 0 && errno == EINTR) {
      }
      kill(-w.pid, SIGKILL);
    }
    for (auto& w : workers_) {
      close_fd(w.out.fd);
      close_fd(w.err.fd);
    }
  }
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  int run(const std::vector<std::string>& worker_argv, int port) {
    const int nproc = o_.nproc_per_node;
    const bool keep_omp = is_set("OMP_NUM_THREADS");
    const std::vector<std::string> env = base_environment(keep_omp);
    const std::string program = resolve_program(worker_argv[0]);
    const int omp_threads = std::max(1, available_cores() / nproc);

    workers_.resize(static_cast<size_t>(nproc));
    for (int r = 0; r < nproc && !stopping_; ++r) {
      Worker& w = workers_[static_cast<size_t>(r)];
      w.local_rank = r;
      w.rank = o_.node_rank * nproc + r;
      w.prefix = "[rank " + std::to_string(w.rank) + "] ";
      std::vector<std::string> wenv = env;
      wenv.push_back("RANK=" + std::to_string(w.rank));
      wenv.push_back("WORLD_SIZE=" + std::to_string(o_.nnodes * nproc));
      wenv.push_back("LOCAL_RANK=" + std::to_string(r));
      wenv.push_back("LOCAL_WORLD_SIZE=" + std::to_string(nproc));
      wenv.push_back("GROUP_RANK=" + std::to_string(o_.node_rank));
      wenv.push_back("MASTER_ADDR=" + o_.master_addr);
      wenv.push_back("MASTER_PORT=" + std::to_string(port));
      if (!keep_omp) wenv.push_back("OMP_NUM_THREADS=" + std::to_string(omp_threads));
      wenv.push_back("RH_LAUNCHED=1");
      start(w, program, worker_argv, wenv);
    }
    return supervise();
  }

 private:
  void message(const std::string& line) {
    write_all(o_.stderr_fd, "runner-host launcher: " + line + "\n");
  }

  // Marks the run failed with `code` (the first failure wins) and stops the
  // workers still running: SIGTERM, then SIGKILL after the grace. When a
  // signal was forwarded to them already, that was their SIGTERM: a worker
  // that ends at once must not cut short the others' handling of it.
  void fail(int code) {
    if (stopping_) return;
    exit_code_ = code;
    stopping_ = true;
    bool others = false;
    for (auto& w : workers_) {
      if (!w.running) continue;
      others = true;
      if (!signalled_) signal_worker(w, SIGTERM);
    }
    if (others) {
      message(std::string("stopping the other ranks (") + (signalled_ ? "" : "SIGTERM, then ") +
              "SIGKILL after " + format_seconds(o_.kill_grace_s) + " s)");
      deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o_.kill_grace_s));
    }
  }

  // Starts one worker; a failure to start it fails the run.
  void start(Worker& w, const std::string& program, std::vector<std::string> argv,
             std::vector<std::string> env) {
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
      message("cannot start rank " + std::to_string(w.rank) + ": " + errno_text("pipe", e));
      fail(kExitLaunchFailed);
      return;
    }
    std::vector<char*> cargv = c_strings(argv);
    std::vector<char*> cenv = c_strings(env);
    bool ignored[NSIG] = {};
    for (int sig : kForwarded) ignored[sig] = signals_.was_ignored(sig);
    ignored[SIGCHLD] = signals_.was_ignored(SIGCHLD);
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
        for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) {
          sa.sa_handler = ignored[sig] ? SIG_IGN : SIG_DFL;
          sigaction(sig, &sa, nullptr);
        }
        sigprocmask(SIG_SETMASK, &block.old_mask(), nullptr);
        execve(program.c_str(), cargv.data(), cenv.data());
        die(errno);
      }
    }
    if (pid < 0) {
      const int e = errno;
      close_all();
      message("cannot start rank " + std::to_string(w.rank) + ": " + errno_text("fork", e));
      fail(kExitLaunchFailed);
      return;
    }
    setpgid(pid, pid);  // also here, so that signals to the group reach it at once
    w.pid = pid;
    w.running = true;
    close_fd(out[1]);
    close_fd(err[1]);
    close_fd(devnull);
    w.out = Stream{out[0], o_.stdout_fd, {}};
    w.err = Stream{err[0], o_.stderr_fd, {}};
    set_nonblocking(w.out.fd);
    set_nonblocking(w.err.fd);

    // The status pipe closes on a successful execve; otherwise it carries errno.
    close_fd(exec_status[1]);
    int exec_errno = 0;
    ssize_t n;
    while ((n = read(exec_status[0], &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR) {
    }
    close_fd(exec_status[0]);
    if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
      message("cannot start rank " + std::to_string(w.rank) + ": " +
              errno_text("execute " + program, exec_errno));
      fail(kExitCannotExecute);
    }
  }

  // Reaps the workers that ended; the first failure stops the others.
  void reap() {
    for (auto& w : workers_) {
      if (!w.running) continue;
      int status = 0;
      pid_t r = waitpid(w.pid, &status, WNOHANG);
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
      w.running = false;
      // Whatever the worker left in its process group goes with it; the group
      // id cannot have been reused yet (pids of live groups are not reused).
      kill(-w.pid, SIGKILL);
      if (r < 0) continue;  // ECHILD: someone else reaped it
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
      if (code != 0 && !stopping_) {
        message("rank " + std::to_string(w.rank) + " " + what);
        fail(code);
      }
    }
  }

  bool any_running() const {
    return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
  }

  int supervise() {
    std::vector<pollfd> fds;
    std::vector<std::pair<Stream*, const std::string*>> streams;
    while (true) {
      reap();
      if (!any_running()) break;

      if (stopping_ && !killed_ && Clock::now() >= deadline_) {
        for (auto& w : workers_) {
          if (!w.running) continue;
          message("rank " + std::to_string(w.rank) + " still running after " +
                  format_seconds(o_.kill_grace_s) + " s: SIGKILL");
          signal_worker(w, SIGKILL);
          kill(w.pid, SIGKILL);  // in case it left its group
        }
        killed_ = true;
      }

      fds.clear();
      streams.clear();
      fds.push_back({signals_.read_fd(), POLLIN, 0});
      for (auto& w : workers_)
        for (Stream* s : {&w.out, &w.err})
          if (s->fd >= 0) {
            fds.push_back({s->fd, POLLIN, 0});
            streams.emplace_back(s, &w.prefix);
          }
      int timeout_ms = -1;
      if (stopping_ && !killed_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
        timeout_ms = static_cast<int>(std::max<long long>(0, left.count()) + 1);
      }
      int n = poll(fds.data(), fds.size(), timeout_ms);
      if (n < 0 && errno != EINTR) {
        // Cannot wait on the pipes (should not happen): fall back to a short sleep.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      if (n <= 0) continue;

      if (fds[0].revents != 0) {
        for (int sig : signals_.take()) {
          if (sig == SIGCHLD) continue;  // reaped at the top of the loop
          message("forwarding " + signal_name(sig) + " to the workers");
          signalled_ = true;
          for (auto& w : workers_)
            if (w.running) signal_worker(w, sig);
        }
      }
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) read_stream(*streams[i - 1].first, *streams[i - 1].second);
    }
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
    return exit_code_;
  }

  const LaunchOptions& o_;
  SignalScope& signals_;
  std::vector<Worker> workers_;
  bool stopping_ = false;   // a worker failed: the others are being stopped
  bool signalled_ = false;  // the launcher forwarded a signal to the workers
  bool killed_ = false;
  int exit_code_ = 0;
  Clock::time_point deadline_{};
};

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

int pick_free_port(const std::string& addr) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int gai = getaddrinfo(addr.c_str(), "0", &hints, &found);
  if (gai != 0)
    throw std::runtime_error("cannot resolve master address '" + addr + "': " + gai_strerror(gai));
  std::string last_error = "no address";
  int port = -1;
  for (addrinfo* ai = found; ai != nullptr && port < 0; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) == 0) {
      if (bound.ss_family == AF_INET)
        port = ntohs(reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
      else if (bound.ss_family == AF_INET6)
        port = ntohs(reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port);
    } else {
      last_error = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (port <= 0)
    throw std::runtime_error("cannot bind a free port on master address '" + addr +
                             "': " + last_error);
  return port;
}

int launch(const LaunchOptions& options, const std::vector<std::string>& worker_argv) {
  validate(options, worker_argv);
  int port = options.master_port;
  if (port == 0) {
    try {
      port = pick_free_port(options.master_addr);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument(std::string("--master-port 0: ") + e.what());
    }
  }
  std::fflush(nullptr);  // nothing buffered may be written twice or out of order
  SignalScope signals;
  Supervisor supervisor(options, signals);
  return supervisor.run(worker_argv, port);
}

}  // namespace rh::launch
