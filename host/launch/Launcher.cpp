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
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "launch/WorkerEnv.hpp"

extern char** environ;

namespace rh::launch {
namespace {

using Clock = std::chrono::steady_clock;

// The signals the launcher forwards to its workers. SLURM's `--signal` warns of
// preemption with SIGUSR1/SIGUSR2 (or SIGQUIT), so they must reach the workers.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
// Whether a forwarded signal asks the workers to end: it starts the grace
// period after which those left are killed. SIGUSR1/SIGUSR2 only warn (a
// worker saves a checkpoint and ends on its own, which is then a failure).
bool is_terminating(int sig) { return sig != SIGUSR1 && sig != SIGUSR2; }
// The signals whose disposition a worker gets as the launcher's caller had it
// (ignored stays ignored, anything else is the default): the forwarded ones,
// SIGCHLD, and SIGPIPE, which the launcher itself ignores.
constexpr int kResetInWorker[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT,
                                  SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};
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

// Writes all of `data` to fd. Returns false on an error other than
// EINTR/EAGAIN, EPIPE included (SIGPIPE is ignored while launch() runs): a
// closed terminal or pipe must not stop the supervision.
bool write_all(int fd, const std::string& data) {
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
      return false;
    }
  }
  return true;
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

// Where the launcher writes (stdout_fd or stderr_fd). Once a write fails
// (EPIPE: `runner-host ... | head` after head exited) the output is closed:
// what comes later for it is read from the workers and dropped, so that they
// never block on a full pipe and keep running.
struct Output {
  int fd = -1;
  bool closed = false;
  int error = 0;  // errno of the failed write
};

// One of a worker's output streams: the read end of its pipe and the bytes
// of a line not complete yet.
struct Stream {
  int fd = -1;
  Output* out = nullptr;
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
// or to the worker alone when it has no group of its own. Only for a worker
// not reaped yet: its pid, and so its group id, cannot have been reused.
void signal_worker(const Worker& w, int sig) {
  if (kill(-w.pid, sig) != 0 && errno == ESRCH) kill(w.pid, sig);
}

void write_output(Output& out, const std::string& text) {
  if (out.closed) return;
  if (!write_all(out.fd, text)) {
    out.closed = true;
    out.error = errno;
  }
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
  if (!text.empty()) write_output(*s.out, text);
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
    // A write to a closed stdout (`runner-host ... | head`) must fail with
    // EPIPE, not kill the launcher and with it (PR_SET_PDEATHSIG) the workers.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGPIPE, &ignore, &old_[SIGPIPE]);
  }
  ~SignalScope() {
    for (int sig : kForwarded) sigaction(sig, &old_[sig], nullptr);
    sigaction(SIGCHLD, &old_[SIGCHLD], nullptr);
    sigaction(SIGPIPE, &old_[SIGPIPE], nullptr);
    g_signal_pipe_write = -1;
    close_fd(read_fd_);
    close_fd(write_fd_);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  int read_fd() const { return read_fd_; }
  // What a worker starts with for `sig` (one of kResetInWorker): ignored if
  // the launcher's caller ignored it, the default otherwise.
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
  static const char* const kOwned[] = {"RANK",
                                       "WORLD_SIZE",
                                       "LOCAL_RANK",
                                       "LOCAL_WORLD_SIZE",
                                       "GROUP_RANK",
                                       "MASTER_ADDR",
                                       "MASTER_PORT",
                                       "RH_LAUNCHED",
                                       "OMP_NUM_THREADS",
                                       "RH_JOB_ID",
                                       "RH_MASTER_ADDR_FROM",
                                       "RH_MASTER_PORT_FROM"};
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
    bad((o.master_port_from.empty() ? std::string("--master-port") : o.master_port_from) +
        " 0 (pick a free port) needs --nnodes 1: every node must be given the same port");
  if (o.master_addr.empty()) bad("--master-addr: empty");
  if (worker_argv.empty()) bad("no worker command");
  if (!(o.kill_grace_s >= 0)) bad("kill_grace_s: expected 0 or more");
}

class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, SignalScope& signals)
      : o_(o), signals_(signals), out_{o.stdout_fd}, err_{o.stderr_fd} {}

  ~Supervisor() {
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
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // `port` and `job_id` as launch() settled them; `port_from`: where the
  // port came from, for the workers' log.
  int run(const std::vector<std::string>& worker_argv, int port, const std::string& port_from,
          const std::string& job_id) {
    const int nproc = o_.nproc_per_node;
    const bool keep_omp = is_set("OMP_NUM_THREADS");
    const std::vector<std::string> env = base_environment(keep_omp);
    const std::string program = resolve_program(worker_argv[0]);
    const int omp_threads = std::max(1, available_cores() / nproc);

    workers_.resize(static_cast<size_t>(nproc));
    for (int r = 0; r < nproc && !failed_; ++r) {
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
      wenv.push_back("RH_MASTER_ADDR_FROM=" +
                     (o_.master_addr_from.empty() ? "--master-addr" : o_.master_addr_from));
      wenv.push_back("RH_MASTER_PORT_FROM=" + port_from);
      wenv.push_back("RH_JOB_ID=" + job_id);
      if (!keep_omp) wenv.push_back("OMP_NUM_THREADS=" + std::to_string(omp_threads));
      wenv.push_back("RH_LAUNCHED=1");
      start(w, program, worker_argv, wenv);
    }
    return supervise();
  }

 private:
  void message(const std::string& line) {
    write_output(err_, "runner-host launcher: " + line + "\n");
  }

  // Says once that stdout is closed (to stderr, when that is still open).
  void report_closed_stdout() {
    if (!out_.closed || closed_stdout_reported_) return;
    closed_stdout_reported_ = true;
    if (err_.fd != out_.fd)
      message("stdout closed (" + std::string(std::strerror(out_.error)) +
              "): the workers' further stdout is dropped");
  }

  // Starts the grace period (once): the workers left when it ends are killed.
  void start_grace() {
    if (grace_started_) return;
    grace_started_ = true;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(o_.kill_grace_s));
  }

  // SIGKILLs every worker still running (the grace is over, or a second
  // SIGINT), naming each with `why` when it is not empty.
  void kill_all(const std::string& why) {
    for (auto& w : workers_) {
      if (!w.running) continue;
      if (!why.empty()) message("rank " + std::to_string(w.rank) + " " + why + ": SIGKILL");
      signal_worker(w, SIGKILL);
      kill(w.pid, SIGKILL);  // in case it left its group
    }
    killed_ = true;
  }

  // Marks the run failed with `code` (the first failure wins) and stops the
  // workers still running: SIGTERM, then SIGKILL after the grace. When a
  // terminating signal was forwarded to them already, that was their SIGTERM
  // and its grace period runs already: a worker that ends at once must not cut
  // short the others' handling of it. After SIGUSR1/SIGUSR2 (a preemption
  // warning: each worker saves a checkpoint and ends non-zero) the first to
  // end starts the grace but adds no SIGTERM: the others are acting on the
  // warning already, and a worker takes a second stop signal as "end now",
  // which would cut its checkpoint short.
  void fail(int code) {
    if (failed_) return;
    failed_ = true;
    exit_code_ = code;
    if (grace_started_) return;
    bool others = false;
    for (auto& w : workers_) {
      if (!w.running) continue;
      others = true;
      if (warned_by_ == 0) signal_worker(w, SIGTERM);
    }
    if (others) {
      message("stopping the other ranks (" +
              (warned_by_ == 0 ? std::string("SIGTERM, then ")
                               : "they were sent " + signal_name(warned_by_) + ": ") +
              "SIGKILL after " + format_seconds(o_.kill_grace_s) + " s)");
      start_grace();
    }
  }

  // Forwards a signal the launcher received to every running worker; a
  // terminating one starts the grace period, a second SIGINT (Ctrl-C twice)
  // kills the workers at once.
  void forward(int sig) {
    if (sig == SIGINT && ++sigint_count_ >= 2) {
      if (!killed_) {
        message("second SIGINT: SIGKILL to the workers");
        kill_all("");
      }
      return;
    }
    const bool terminating = is_terminating(sig);
    const bool starts_grace = terminating && !grace_started_;
    message("forwarding " + signal_name(sig) + " to the workers" +
            (starts_grace ? " (SIGKILL to those left after " + format_seconds(o_.kill_grace_s) +
                                " s; Ctrl-C again to kill them now)"
                          : ""));
    for (auto& w : workers_)
      if (w.running) signal_worker(w, sig);
    if (terminating)
      start_grace();
    else if (warned_by_ == 0)
      warned_by_ = sig;
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
      if (code != 0 && !failed_) {
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

      if (grace_started_ && !killed_ && Clock::now() >= deadline_)
        kill_all("still running after " + format_seconds(o_.kill_grace_s) + " s");

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
      if (grace_started_ && !killed_) {
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
          forward(sig);
        }
      }
      for (size_t i = 1; i < fds.size(); ++i)
        if (fds[i].revents != 0) read_stream(*streams[i - 1].first, *streams[i - 1].second);
      report_closed_stdout();
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
    report_closed_stdout();
    return exit_code_;
  }

  const LaunchOptions& o_;
  SignalScope& signals_;
  Output out_;  // the workers' stdout goes here
  Output err_;  // their stderr and the launcher's messages
  std::vector<Worker> workers_;
  bool failed_ = false;         // a worker failed (its code is exit_code_)
  bool grace_started_ = false;  // after a failure or a terminating signal; ends at deadline_
  bool killed_ = false;         // every worker left was SIGKILLed
  bool closed_stdout_reported_ = false;
  int sigint_count_ = 0;
  int warned_by_ = 0;  // the first SIGUSR1/SIGUSR2 forwarded, or 0
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

int launch(const LaunchOptions& options, const std::vector<std::string>& worker_argv) {
  validate(options, worker_argv);
  int port = options.master_port;
  std::string port_from =
      options.master_port_from.empty() ? "--master-port" : options.master_port_from;
  // The port stays reserved while the workers run: no other job's launcher,
  // and no connection's local end, can be given it before rank 0 listens.
  PortReservation reservation;
  if (port == 0) {
    try {
      reservation = PortReservation::free_port(options.master_addr);
    } catch (const std::runtime_error& e) {
      throw std::invalid_argument("a free port for the rendezvous (port 0, from " + port_from +
                                  "): " + e.what());
    }
    port = reservation.port();
    port_from = "the launcher, which picked a free port";
  } else if (options.node_rank == 0) {
    bool taken = false;
    reservation = PortReservation::given_port(options.master_addr, port, taken);
    if (taken)
      throw std::invalid_argument(
          "port " + std::to_string(port) + " on " + options.master_addr + " (from " + port_from +
          ") is taken: another job's rendezvous store, or another program, listens on it. Give "
          "this job a port of its own with --master-port PORT (or MASTER_PORT, or "
          "dist.master_port in the job); on one node, leave them all unset and the launcher "
          "picks a free port");
  }
  std::string job_id = options.job_id;
  if (job_id.empty()) {
    const char* given = std::getenv("RH_JOB_ID");
    if (given != nullptr && *given != '\0')
      job_id = given;
    else if (options.nnodes == 1)
      job_id = random_job_id();
    else  // every node's launcher must arrive at the same id
      job_id = job_id_from("runner-host launcher, " + std::to_string(options.nnodes) + " nodes x " +
                           std::to_string(options.nproc_per_node) + " ranks, rendezvous at " +
                           options.master_addr + ":" + std::to_string(port));
  }
  std::fflush(nullptr);  // nothing buffered may be written twice or out of order
  SignalScope signals;
  Supervisor supervisor(options, signals);
  return supervisor.run(worker_argv, port, port_from, job_id);
}

}  // namespace rh::launch
