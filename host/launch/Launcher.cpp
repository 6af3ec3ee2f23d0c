#include "launch/Launcher.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "launch/LauncherSignals.hpp"
#include "launch/WorkerOutput.hpp"
#include "launch/WorkerProcesses.hpp"

extern char** environ;

namespace rh::launch {
namespace {

using Clock = std::chrono::steady_clock;
using detail::Output;
using detail::signal_name;
using detail::SignalScope;
using detail::Worker;
using detail::WorkerProcesses;

std::string format_seconds(double s) {
  std::ostringstream out;
  out << s;
  return out.str();
}

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

// What the launcher decides while its workers run: the first failure and
// the exit code, SIGTERM to the others, the grace period, what a forwarded
// signal means, its messages. The processes themselves are WorkerProcesses'.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, SignalScope& signals)
      : o_(o),
        signals_(signals),
        out_{o.stdout_fd},
        err_{o.stderr_fd},
        workers_(signals, out_, err_) {}

  // `rdzv`: the port and job id launch() settled.
  int run(const std::vector<std::string>& worker_argv, const Rendezvous& rdzv) {
    const int nproc = o_.nproc_per_node;
    const bool keep_omp = is_set("OMP_NUM_THREADS");
    const std::vector<std::string> env = base_environment(keep_omp);
    const std::string program = WorkerProcesses::resolve_program(worker_argv[0]);
    const int omp_threads = std::max(1, available_cores() / nproc);

    for (int r = 0; r < nproc && !failed_; ++r) {
      const int rank = o_.node_rank * nproc + r;
      std::vector<std::string> wenv = env;
      wenv.push_back("RANK=" + std::to_string(rank));
      wenv.push_back("WORLD_SIZE=" + std::to_string(o_.nnodes * nproc));
      wenv.push_back("LOCAL_RANK=" + std::to_string(r));
      wenv.push_back("LOCAL_WORLD_SIZE=" + std::to_string(nproc));
      wenv.push_back("GROUP_RANK=" + std::to_string(o_.node_rank));
      wenv.push_back("MASTER_ADDR=" + o_.master_addr);
      wenv.push_back("MASTER_PORT=" + std::to_string(rdzv.port));
      wenv.push_back("RH_MASTER_ADDR_FROM=" +
                     (o_.master_addr_from.empty() ? "--master-addr" : o_.master_addr_from));
      wenv.push_back("RH_MASTER_PORT_FROM=" + rdzv.port_from);
      wenv.push_back("RH_JOB_ID=" + rdzv.job_id);
      if (!keep_omp) wenv.push_back("OMP_NUM_THREADS=" + std::to_string(omp_threads));
      wenv.push_back("RH_LAUNCHED=1");
      if (auto failure = workers_.start(r, rank, program, worker_argv, std::move(wenv))) {
        message(failure->message);
        fail(failure->code);
      }
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
    workers_.kill_all([&](const Worker& w) {
      if (!why.empty()) message("rank " + std::to_string(w.rank) + " " + why + ": SIGKILL");
    });
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
    if (!workers_.any_running()) return;
    if (warned_by_ == 0) workers_.signal_all(SIGTERM);
    message("stopping the other ranks (" +
            (warned_by_ == 0 ? std::string("SIGTERM, then ")
                             : "they were sent " + signal_name(warned_by_) + ": ") +
            "SIGKILL after " + format_seconds(o_.kill_grace_s) + " s)");
    start_grace();
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
    const bool terminating = detail::is_terminating(sig);
    const bool starts_grace = terminating && !grace_started_;
    message("forwarding " + signal_name(sig) + " to the workers" +
            (starts_grace ? " (SIGKILL to those left after " + format_seconds(o_.kill_grace_s) +
                                " s; Ctrl-C again to kill them now)"
                          : ""));
    workers_.signal_all(sig);
    if (terminating)
      start_grace();
    else if (warned_by_ == 0)
      warned_by_ = sig;
  }

  // A worker that ended: the first failure stops the others.
  void ended(const Worker& w, int code, const std::string& what) {
    if (code != 0 && !failed_) {
      message("rank " + std::to_string(w.rank) + " " + what);
      fail(code);
    }
  }

  int supervise() {
    std::vector<pollfd> fds;
    while (true) {
      workers_.reap(
          [&](const Worker& w, int code, const std::string& what) { ended(w, code, what); });
      if (!workers_.any_running()) break;

      if (grace_started_ && !killed_ && Clock::now() >= deadline_)
        kill_all("still running after " + format_seconds(o_.kill_grace_s) + " s");

      fds.clear();
      fds.push_back({signals_.read_fd(), POLLIN, 0});
      workers_.add_poll_fds(fds);
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
      workers_.read_polled(fds.data() + 1);
      report_closed_stdout();
    }
    workers_.drain();
    report_closed_stdout();
    return exit_code_;
  }

  const LaunchOptions& o_;
  SignalScope& signals_;
  Output out_;  // the workers' stdout goes here
  Output err_;  // their stderr and the launcher's messages
  WorkerProcesses workers_;
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

int launch(const LaunchOptions& options, const std::vector<std::string>& worker_argv) {
  validate(options, worker_argv);
  // The port stays reserved while the workers run (rdzv.reservation).
  const Rendezvous rdzv = settle_rendezvous(options);
  std::fflush(nullptr);  // nothing buffered may be written twice or out of order
  SignalScope signals;
  Supervisor supervisor(options, signals);
  return supervisor.run(worker_argv, rdzv);
}

}  // namespace rh::launch
