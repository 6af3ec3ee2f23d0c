#include "launch/Launcher.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "launch/ElasticAgent.hpp"
#include "launch/LaunchFlags.hpp"
#include "launch/LaunchGate.hpp"
#include "launch/LauncherSignals.hpp"
#include "launch/WorkerEnv.hpp"  // seconds_since_epoch
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
                                       "RH_MASTER_PORT_FROM",
                                       "TORCHELASTIC_USE_AGENT_STORE",
                                       "TORCHELASTIC_RESTART_COUNT",
                                       "TORCHELASTIC_MAX_RESTARTS",
                                       "RH_ELASTIC_BASE_WORLD_SIZE",
                                       "RH_ELASTIC_DETECTED_AT"};
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
  // The flags' own rules, on the options as resolved (the port may have
  // come from MASTER_PORT or the job: master_port_from names it).
  check_launch_shape(o);
  check_master(o.master_addr, o.master_port, o.nnodes,
               o.master_port_from.empty() ? "--master-port" : o.master_port_from);
  if (worker_argv.empty()) bad("no worker command");
  if (!(o.kill_grace_s >= 0)) bad("kill_grace_s: expected 0 or more");
}

// The world one round of workers runs in: the whole job's when it is not
// elastic, else what the elastic rendezvous closed the round with.
struct RoundPlan {
  int nnodes = 1;
  int node_rank = 0;
  std::vector<std::string> env;  // added to each worker's environment
  // Elastic: a failure another node reported in this round, looked at
  // every kFailurePollS while the workers run; empty when not elastic.
  std::function<std::optional<std::string>()> failure_elsewhere;
};

constexpr double kFailurePollS = 0.25;

// What the launcher decides while its workers run: the first failure and
// the exit code, SIGTERM to the others, the grace period, what a forwarded
// signal means, its messages. The processes themselves are WorkerProcesses'.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& o, SignalScope& signals, RoundPlan plan)
      : o_(o),
        plan_(std::move(plan)),
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
    if (o_.gate) {
      gate_.emplace();
      if (!gate_->make()) {
        message("cannot make the launch gate's pipes (" + std::string(std::strerror(errno)) +
                "): every rank checks the job itself");
        gate_.reset();
      }
    }

    for (int r = 0; r < nproc && !failed_; ++r) {
      const int rank = plan_.node_rank * nproc + r;
      std::vector<std::string> wenv = env;
      wenv.push_back("RANK=" + std::to_string(rank));
      wenv.push_back("WORLD_SIZE=" + std::to_string(plan_.nnodes * nproc));
      wenv.push_back("LOCAL_RANK=" + std::to_string(r));
      wenv.push_back("LOCAL_WORLD_SIZE=" + std::to_string(nproc));
      wenv.push_back("GROUP_RANK=" + std::to_string(plan_.node_rank));
      wenv.insert(wenv.end(), plan_.env.begin(), plan_.env.end());
      wenv.push_back("MASTER_ADDR=" + o_.master_addr);
      wenv.push_back("MASTER_PORT=" + std::to_string(rdzv.port));
      wenv.push_back("RH_MASTER_ADDR_FROM=" +
                     (o_.master_addr_from.empty() ? "--master-addr" : o_.master_addr_from));
      wenv.push_back("RH_MASTER_PORT_FROM=" + rdzv.port_from);
      wenv.push_back("RH_JOB_ID=" + rdzv.job_id);
      if (!keep_omp) wenv.push_back("OMP_NUM_THREADS=" + std::to_string(omp_threads));
      wenv.push_back("RH_LAUNCHED=1");
      if (gate_) wenv.push_back(gate_->env_entry(r));
      if (auto failure = workers_.start(r, rank, program, worker_argv, std::move(wenv),
                                        gate_ ? gate_->worker_fd(r) : -1)) {
        message(failure->message);
        fail(failure->code);
      }
    }
    if (gate_) gate_->started();
    return supervise();
  }

  // After run(): a terminating signal or a preemption warning (SIGUSR1/2)
  // was forwarded: the workers were told to stop, which no restart undoes.
  bool stopped_by_signal() const { return grace_by_signal_ || warned_by_ != 0; }
  // The first failure, as the launcher wrote it ("rank 2 exited with code
  // 1"), or another node's that stopped these workers; "" when none.
  const std::string& failure() const { return failure_; }
  bool failed_elsewhere() const { return failed_elsewhere_; }
  // When the launcher learned of the first failure (wall clock, seconds).
  double failure_seen_at() const { return failure_seen_at_; }

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
    if (terminating) {
      grace_by_signal_ = true;
      start_grace();
    } else if (warned_by_ == 0)
      warned_by_ = sig;
  }

  // The launch gate: rank 0's verdict read (`block`: rank 0 has ended,
  // read to its end). A refusal is printed once and ends the run with 2,
  // without stopping anyone: the waiting ranks end on their own.
  void read_gate(bool block) {
    if (!gate_ || gate_->state() != LauncherGate::State::Pending) return;
    gate_->read(o_.nproc_per_node - 1, block);
    if (gate_->state() != LauncherGate::State::Refused) return;
    write_output(err_, gate_->refusal());
    failed_ = true;
    exit_code_ = kGateRefusedExit;
  }
  bool gate_closed() const {
    return gate_ && (gate_->state() == LauncherGate::State::Refused ||
                     gate_->state() == LauncherGate::State::Closed);
  }

  // A worker that ended: the first failure stops the others.
  void ended(const Worker& w, int code, const std::string& what) {
    if (w.local_rank == 0) read_gate(true);
    // A refused job was said once; the ranks that waited at the gate end
    // with 2 and nothing to say when it closes.
    if (gate_closed() && (w.local_rank != 0 || gate_->state() == LauncherGate::State::Refused))
      return;
    if (code != 0 && !failed_) {
      failure_ = "rank " + std::to_string(w.rank) + " " + what;
      failure_seen_at_ = seconds_since_epoch();
      message(failure_);
      fail(code);
    }
  }

  // Elastic: another node's failure stops this node's workers too (they
  // restart on the next round's world).
  void poll_failure_elsewhere() {
    if (!plan_.failure_elsewhere || failed_ || Clock::now() < next_failure_poll_) return;
    next_failure_poll_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(kFailurePollS));
    std::optional<std::string> elsewhere;
    try {
      elsewhere = plan_.failure_elsewhere();
    } catch (const std::exception& e) {
      elsewhere = e.what();
    }
    if (!elsewhere) return;
    failure_ = *elsewhere;
    failed_elsewhere_ = true;
    failure_seen_at_ = seconds_since_epoch();
    message("another node failed (" + failure_ + "): stopping this node's workers");
    fail(1);
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
      // The gate's verdict pipe last, after the workers' pipes.
      workers_.add_poll_fds(fds);
      const int gate_fd = gate_ ? gate_->poll_fd() : -1;
      if (gate_fd >= 0) fds.push_back({gate_fd, POLLIN, 0});
      int timeout_ms = -1;
      if (grace_started_ && !killed_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
        timeout_ms = static_cast<int>(std::max<long long>(0, left.count()) + 1);
      }
      if (plan_.failure_elsewhere && !failed_) {
        poll_failure_elsewhere();
        const int poll_ms = static_cast<int>(kFailurePollS * 1000);
        timeout_ms = timeout_ms < 0 ? poll_ms : std::min(timeout_ms, poll_ms);
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
      if (gate_fd >= 0 && fds.back().revents != 0) read_gate(false);
      report_closed_stdout();
    }
    workers_.drain();
    report_closed_stdout();
    return exit_code_;
  }

  const LaunchOptions& o_;
  RoundPlan plan_;
  SignalScope& signals_;
  Output out_;  // the workers' stdout goes here
  Output err_;  // their stderr and the launcher's messages
  WorkerProcesses workers_;
  std::optional<LauncherGate> gate_;  // o_.gate: this round's launch gate
  bool failed_ = false;               // a worker failed (its code is exit_code_)
  bool grace_started_ = false;        // after a failure or a terminating signal; ends at deadline_
  bool killed_ = false;               // every worker left was SIGKILLed
  bool closed_stdout_reported_ = false;
  int sigint_count_ = 0;
  int warned_by_ = 0;              // the first SIGUSR1/SIGUSR2 forwarded, or 0
  bool grace_by_signal_ = false;   // a terminating signal was forwarded
  std::string failure_;            // see failure()
  bool failed_elsewhere_ = false;  // failure_ is another node's
  double failure_seen_at_ = 0;
  Clock::time_point next_failure_poll_{};
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

std::string nodes_list(const std::vector<int>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size(); ++i) out += (i ? ", " : "") + std::to_string(nodes[i]);
  return out;
}

// --max-restarts: round after round, each on the world the elastic
// rendezvous closed it with (ElasticAgent.hpp), until the workers end well,
// a signal stops them, the restarts run out or too few nodes are left.
int run_elastic(const LaunchOptions& o, const std::vector<std::string>& worker_argv,
                const Rendezvous& rdzv, SignalScope& signals, const ElasticAgentFactory& agents) {
  Output err{o.stderr_fd};
  auto message = [&](const std::string& line) {
    write_output(err, "runner-host launcher: " + line + "\n");
  };
  const std::string node = "node " + std::to_string(o.node_rank);
  std::unique_ptr<ElasticAgent> agent;
  try {
    agent = agents(ElasticAgentOptions{o.master_addr, rdzv.port, o.node_rank, o.nnodes,
                                       o.min_nodes > 0 ? o.min_nodes : o.nnodes, rdzv.job_id,
                                       o.elastic_timeout_s, o.host});
  } catch (const std::exception& e) {
    message(e.what());
    return 1;
  }
  const int base_world = o.nnodes * o.nproc_per_node;
  double detected_at = 0;
  std::vector<int> previous;
  for (int round = 0;; ++round) {
    ElasticWorld world;
    try {
      world = agent->join(round);
    } catch (const std::exception& e) {
      message(node + ": " + e.what());
      return 1;
    }
    if (round > 0)
      message("restart " + std::to_string(round) + " of " + std::to_string(o.max_restarts) +
              ": nodes " + nodes_list(world.nodes) + " (were " + nodes_list(previous) + "), " +
              std::to_string(world.nnodes() * o.nproc_per_node) + " rank(s); this is " + node +
              ", node rank " + std::to_string(world.node_rank) + " now");
    previous = world.nodes;
    RoundPlan plan;
    plan.nnodes = world.nnodes();
    plan.node_rank = world.node_rank;
    plan.env = {"TORCHELASTIC_USE_AGENT_STORE=True",
                "TORCHELASTIC_RESTART_COUNT=" + std::to_string(round),
                "TORCHELASTIC_MAX_RESTARTS=" + std::to_string(o.max_restarts),
                "RH_ELASTIC_BASE_WORLD_SIZE=" + std::to_string(base_world)};
    if (round > 0) {
      std::ostringstream at;
      at.precision(17);
      at << detected_at;
      plan.env.push_back("RH_ELASTIC_DETECTED_AT=" + at.str());
    }
    plan.failure_elsewhere = [&agent, round] { return agent->failure(round); };
    Supervisor supervisor(o, signals, std::move(plan));
    const int code = supervisor.run(worker_argv, rdzv);
    if (supervisor.failure().empty()) return code;
    if (supervisor.stopped_by_signal()) return code;
    if (!supervisor.failed_elsewhere()) {
      try {
        agent->report_failure(round, node + " (" + o.host + "): " + supervisor.failure());
      } catch (const std::exception& e) {
        message(e.what());
        return code != 0 ? code : 1;
      }
    }
    if (round >= o.max_restarts) {
      message("no restart left (--max-restarts " + std::to_string(o.max_restarts) +
              "): the job ends");
      return code != 0 ? code : 1;
    }
    detected_at = supervisor.failure_seen_at();
    message("restarting: joining round " + std::to_string(round + 1) +
            " of the elastic rendezvous");
  }
}

}  // namespace

int launch(const LaunchOptions& options, const std::vector<std::string>& worker_argv,
           const ElasticAgentFactory& agents) {
  validate(options, worker_argv);
  if (options.max_restarts > 0 && !agents)
    throw std::invalid_argument(
        "--max-restarts needs the elastic rendezvous, which this program "
        "does not provide");
  // The port stays reserved while the workers run (rdzv.reservation).
  const Rendezvous rdzv = settle_rendezvous(options);
  std::fflush(nullptr);  // nothing buffered may be written twice or out of order
  SignalScope signals;
  if (options.max_restarts > 0) return run_elastic(options, worker_argv, rdzv, signals, agents);
  Supervisor supervisor(options, signals, RoundPlan{options.nnodes, options.node_rank, {}, {}});
  return supervisor.run(worker_argv, rdzv);
}

}  // namespace rh::launch
