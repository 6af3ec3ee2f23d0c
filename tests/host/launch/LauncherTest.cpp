// The built-in launcher (host/launch/Launcher): environment per rank, output
// prefixing, exit codes, signals, and that no process outlives it. The workers
// are rh_launch_test_worker (see TestWorker.cpp for its little script).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "ProcessCallRecorder.hpp"
#include "common/TestUtil.hpp"
#include "host/launch/Listener.hpp"
#include "launch/Launcher.hpp"

namespace fs = std::filesystem;
using rh::launch::launch;
using rh::launch::LaunchOptions;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

namespace {

// Sets (or unsets) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_.c_str(), old_->c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

bool wait_until(const std::function<bool()>& done, double timeout_s) {
  const auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (!done()) {
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

// Waits for our child `pid`; SIGKILLs it after timeout_s. Returns its status.
std::optional<int> wait_child(pid_t pid, double timeout_s) {
  int status = 0;
  if (wait_until([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout_s)) return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return std::nullopt;
}

// Makes this process the reaper of its orphaned descendants for a scope, so
// that a test can wait for (and see how died) the workers of a dead launcher.
class ScopedSubreaper {
 public:
  ScopedSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1); }
  ~ScopedSubreaper() { prctl(PR_SET_CHILD_SUBREAPER, 0); }
  ScopedSubreaper(const ScopedSubreaper&) = delete;
  ScopedSubreaper& operator=(const ScopedSubreaper&) = delete;
};

struct LaunchRun {
  int code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

// The lines of `text` that start with `prefix`, without it, in order.
std::vector<std::string> lines_of(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) out.push_back(line.substr(prefix.size()));
  return out;
}

class LauncherTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;
  const fs::path pid_dir = dir / "pids";

  void SetUp() override {
    fs::create_directories(pid_dir);
    // The launcher keeps a signal its caller ignores ignored (nohup, a
    // background job's SIGINT and SIGQUIT; LauncherSignals.cpp): these
    // tests are of a launcher started with the default dispositions, as
    // ctest starts them, also when the test binary runs in a background job
    // (tools/sanitize.sh under `.ci/run &`).
    for (int sig : {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
  }

  static LaunchOptions options(int nproc) {
    LaunchOptions o;
    o.nproc_per_node = nproc;
    o.master_port = 0;
    o.kill_grace_s = 3;
    return o;
  }

  static std::vector<std::string> worker(std::vector<std::string> script) {
    script.insert(script.begin(), RH_LAUNCH_TEST_WORKER);
    return script;
  }

  int open_output(const std::string& name) const {
    return open((dir / name).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }

  // Runs the launcher in this process, its output to files.
  LaunchRun run(LaunchOptions o, const std::vector<std::string>& script) {
    LaunchRun r;
    o.stdout_fd = open_output("out");
    o.stderr_fd = open_output("err");
    const auto t0 = Clock::now();
    r.code = launch(o, worker(script));
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    close(o.stdout_fd);
    close(o.stderr_fd);
    r.out = rh::test::read_file(dir / "out");
    r.err = rh::test::read_file(dir / "err");
    return r;
  }

  // Starts the launcher in a child process (so that it can be signalled or
  // killed); its exit code is launch()'s. Its stdout goes to the file "out",
  // or to stdout_fd when one is given (closed here once the child has it).
  pid_t start_launcher_process(LaunchOptions o, const std::vector<std::string>& script,
                               const std::function<void()>& before = {}, int stdout_fd = -1) {
    o.stdout_fd = stdout_fd >= 0 ? stdout_fd : open_output("out");
    o.stderr_fd = open_output("err");
    const std::vector<std::string> argv = worker(script);
    const pid_t pid = fork();
    if (pid == 0) {
      if (before) before();
      int code = 99;
      try {
        code = launch(o, argv);
      } catch (...) {
      }
      _exit(code);
    }
    close(o.stdout_fd);
    close(o.stderr_fd);
    return pid;
  }

  bool wait_for_pids(int n, const std::string& stem = "pid.") const {
    return wait_until(
        [&] {
          for (int r = 0; r < n; ++r)
            if (!fs::exists(pid_dir / (stem + std::to_string(r)))) return false;
          return true;
        },
        10);
  }

  std::vector<pid_t> pids(const std::string& stem = "pid.") const {
    std::vector<pid_t> out;
    for (const auto& entry : fs::directory_iterator(pid_dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(stem, 0) == 0 && name.find(".tmp") == std::string::npos)
        out.push_back(std::stoi(rh::test::read_file(entry.path())));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void expect_all_gone(const std::string& stem = "pid.") const {
    for (pid_t pid : pids(stem)) EXPECT_TRUE(gone(pid)) << "process " << pid << " is left";
  }

  // Waits until the launcher's stderr (the file "err") contains `text`.
  bool wait_for_err(const std::string& text) const {
    return wait_until(
        [&] { return rh::test::read_file(dir / "err").find(text) != std::string::npos; }, 10);
  }

  void reset_pid_dir() const {
    fs::remove_all(pid_dir);
    fs::create_directories(pid_dir);
  }
};

TEST_F(LauncherTest, EachRankGetsItsEnvironment) {
  ScopedEnv omp("OMP_NUM_THREADS", nullptr);
  LaunchRun r = run(options(2), {"env"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (int rank : {0, 1}) {
    const std::string p = "[rank " + std::to_string(rank) + "] ";
    EXPECT_THAT(r.out, HasSubstr(p + "RANK=" + std::to_string(rank) + "\n"));
    EXPECT_THAT(r.out, HasSubstr(p + "LOCAL_RANK=" + std::to_string(rank) + "\n"));
    EXPECT_THAT(r.out, HasSubstr(p + "WORLD_SIZE=2\n"));
    EXPECT_THAT(r.out, HasSubstr(p + "LOCAL_WORLD_SIZE=2\n"));
    EXPECT_THAT(r.out, HasSubstr(p + "GROUP_RANK=0\n"));
    EXPECT_THAT(r.out, HasSubstr(p + "MASTER_ADDR=127.0.0.1\n"));
    EXPECT_THAT(r.out, HasSubstr(p + "RH_LAUNCHED=1\n"));
    EXPECT_THAT(r.out,
                HasSubstr(p + "OMP_NUM_THREADS=" +
                          std::to_string(std::max(1, rh::launch::available_cores() / 2)) + "\n"));
  }
  // Port 0: one free port was picked, the same for both ranks.
  std::smatch m;
  const std::regex port_re("\\[rank 0\\] MASTER_PORT=([0-9]+)\n");
  ASSERT_TRUE(std::regex_search(r.out, m, port_re)) << r.out;
  const int port = std::stoi(m[1]);
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
  EXPECT_THAT(r.out, HasSubstr("[rank 1] MASTER_PORT=" + std::to_string(port) + "\n"));
}

// Issue 31, item 8: the free port the launcher picks stays reserved while
// the workers run (a plain bind, as an ephemeral port or another job's
// launcher would take it, fails), yet rank 0's store can listen on it.
TEST_F(LauncherTest, TheFreePortIsHeldForRankZerosStore) {
  LaunchRun r = run(options(1), {"port-check"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 0] plain bind: " + std::string(std::strerror(EADDRINUSE))));
  EXPECT_THAT(r.out, HasSubstr("[rank 0] store listen: ok"));
}

using rh::test::Listener;

// A port given that something listens on already is refused before any
// worker starts, saying so, where the port came from, and naming
// --master-port; a free port given is held like a picked one.
TEST_F(LauncherTest, ATakenPortIsRefusedNamingMasterPort) {
  Listener other_job;
  LaunchOptions o = options(2);
  o.master_port = other_job.port();
  o.master_port_from = "MASTER_PORT";
  o.stdout_fd = open_output("out");
  o.stderr_fd = open_output("err");
  try {
    launch(o, worker({"out", "started"}));
    ADD_FAILURE() << "a taken port must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("port " + std::to_string(other_job.port()) +
                                    " on 127.0.0.1 (from MASTER_PORT) is taken: another job's "
                                    "rendezvous store, or another program, listens on it"));
    EXPECT_THAT(e.what(), HasSubstr("--master-port PORT"));
  }
  close(o.stdout_fd);
  close(o.stderr_fd);
  EXPECT_EQ(rh::test::read_file(dir / "out"), "") << "a worker started";
  // Not on another node: rank 0's node checks it.
  o = options(1);
  o.nnodes = 2;
  o.node_rank = 1;
  o.master_port = other_job.port();
  EXPECT_EQ(run(o, {"out", "started"}).code, 0);
  // A free port given: held for rank 0's store too.
  const int port = rh::launch::pick_free_port("127.0.0.1");
  o = options(1);
  o.master_port = port;
  LaunchRun r = run(o, {"port-check", "env"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 0] plain bind: " + std::string(std::strerror(EADDRINUSE))));
  EXPECT_THAT(r.out, HasSubstr("[rank 0] store listen: ok"));
  EXPECT_THAT(r.out, HasSubstr("[rank 0] RH_MASTER_PORT_FROM=--master-port\n"));
}

// Every job gets an id (RH_JOB_ID), the same for all its ranks: a random one
// on one node, one every node's launcher derives alike on several, or the
// one the launcher's environment gives; the workers learn where the port
// came from.
TEST_F(LauncherTest, EveryJobGetsAnIdItsRanksShare) {
  ScopedEnv given("RH_JOB_ID", nullptr);
  auto id_of = [](const std::string& out, int rank) {
    std::smatch m;
    const std::regex re("\\[rank " + std::to_string(rank) + "\\] RH_JOB_ID=([^\n]*)\n");
    return std::regex_search(out, m, re) ? m[1].str() : std::string("(none)");
  };
  LaunchRun a = run(options(2), {"env"});
  ASSERT_EQ(a.code, 0) << a.out << a.err;
  EXPECT_THAT(id_of(a.out, 0), ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(id_of(a.out, 0), id_of(a.out, 1));
  EXPECT_THAT(a.out,
              HasSubstr("[rank 0] RH_MASTER_PORT_FROM=the launcher, which picked a free port\n"));
  EXPECT_THAT(a.out, HasSubstr("[rank 1] RH_MASTER_ADDR_FROM=--master-addr\n"));
  LaunchRun b = run(options(2), {"env"});
  ASSERT_EQ(b.code, 0) << b.out << b.err;
  EXPECT_NE(id_of(a.out, 0), id_of(b.out, 0)) << "two jobs, one id";
  // Two nodes: each node's launcher arrives at the same id.
  LaunchOptions o = options(1);
  o.nnodes = 2;
  o.master_port = 29555;
  o.master_addr = "10.1.2.3";
  LaunchRun node0 = run(o, {"env"});
  o.node_rank = 1;
  LaunchRun node1 = run(o, {"env"});
  ASSERT_EQ(node0.code, 0) << node0.out << node0.err;
  ASSERT_EQ(node1.code, 0) << node1.out << node1.err;
  EXPECT_EQ(id_of(node0.out, 0), id_of(node1.out, 1));
  // Given by the user: kept.
  ScopedEnv mine("RH_JOB_ID", "my-job");
  LaunchRun c = run(options(2), {"env"});
  EXPECT_EQ(id_of(c.out, 0), "my-job");
  EXPECT_EQ(id_of(c.out, 1), "my-job");
}

TEST_F(LauncherTest, SecondNodeRanksAndUserThreadSetting) {
  ScopedEnv omp("OMP_NUM_THREADS", "7");
  ScopedEnv stale("RANK", "42");  // the launcher's own RANK must not leak through
  LaunchOptions o = options(2);
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_addr = "10.1.2.3";
  o.master_port = 29555;
  LaunchRun r = run(o, {"env"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 2] RANK=2\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 3] RANK=3\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 3] LOCAL_RANK=1\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 2] WORLD_SIZE=6\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 3] GROUP_RANK=1\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 2] MASTER_ADDR=10.1.2.3\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 3] MASTER_PORT=29555\n"));
  EXPECT_THAT(r.out, HasSubstr("[rank 2] OMP_NUM_THREADS=7\n"));
  EXPECT_THAT(r.out, Not(HasSubstr("RANK=42")));
}

TEST_F(LauncherTest, PrefixesEveryLineWithTheRank) {
  LaunchRun r = run(options(2), {"out", "first", "err", "oops", "out", "second", "long", "70000",
                                 "partial", "no newline"});
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  for (const std::string p : {"[rank 0] ", "[rank 1] "}) {
    // A line longer than 64 KiB comes in 64 KiB pieces, each prefixed; the last
    // line, with no newline, is flushed at end of file.
    EXPECT_EQ(lines_of(r.out, p),
              (std::vector<std::string>{"first", "second", std::string(65536, 'x'),
                                        std::string(70000 - 65536, 'x'), "no newline"}));
    EXPECT_EQ(lines_of(r.err, p), (std::vector<std::string>{"oops"}));
  }
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_THAT(line, ::testing::MatchesRegex("\\[rank [01]\\] .*")) << line.substr(0, 80);
  EXPECT_EQ(r.out.back(), '\n');
}

TEST_F(LauncherTest, AFailingRankStopsTheOthersAndGivesItsCode) {
  const std::string d = pid_dir.string();
  LaunchRun r =
      run(options(2), {"pidfile", d, "@1", "wait-pids", d, "2", "@1", "exit", "3", "sleep", "30"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: rank 1 exited with code 3\n"));
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: stopping the other ranks"));
  EXPECT_LT(r.seconds, 10) << "rank 0 (sleeping 30 s) was not stopped";
  ASSERT_EQ(pids().size(), 2u);
  expect_all_gone();
}

// The launch gate (LaunchGate.hpp): rank 0 checks first, the others wait.
TEST_F(LauncherTest, AGateRefusedByRankZeroIsSaidOnceAndNoRankGoesOn) {
  LaunchOptions o = options(3);
  o.gate = true;
  LaunchRun r = run(o, {"@0", "gate-refuse", "runner-host: error: job.yaml:3:1: bad", "gate-wait",
                        "out", "went on"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(r.err, "runner-host: error: job.yaml:3:1: bad\n");  // once, unprefixed, nothing else
  EXPECT_EQ(r.out, "");
}

TEST_F(LauncherTest, AGatePassedByRankZeroLetsEveryRankGoOn) {
  LaunchOptions o = options(3);
  o.gate = true;
  // Rank 0 passes only once the others are waiting at the gate (their
  // pid files written): the gate holds them, and then lets them go.
  const std::string d = pid_dir.string();
  LaunchRun r = run(o, {"pidfile", d, "@0", "wait-pids", d, "3", "@0", "out", "checked", "@0",
                        "gate-pass", "gate-wait", "out", "went on"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(lines_of(r.out, "[rank 0] "), (std::vector<std::string>{"checked", "went on"}));
  for (const std::string p : {"[rank 1] ", "[rank 2] "})
    EXPECT_EQ(lines_of(r.out, p), (std::vector<std::string>{"went on"}));
  // Ranks 1 and 2 went on after rank 0 said "checked" (one output file, in
  // the order the launcher wrote it).
  EXPECT_LT(r.out.find("[rank 0] checked"), r.out.find("[rank 1] went on"));
  EXPECT_LT(r.out.find("[rank 0] checked"), r.out.find("[rank 2] went on"));
}

TEST_F(LauncherTest, ARankZeroThatEndsWithoutAVerdictClosesTheGate) {
  LaunchOptions o = options(2);
  o.gate = true;
  LaunchRun r = run(o, {"@0", "exit", "3", "gate-wait", "out", "went on"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: rank 0 exited with code 3\n"));
  EXPECT_THAT(r.err, Not(HasSubstr("rank 1"))) << "the waiting rank ends without a word";
  EXPECT_EQ(r.out, "");
}

TEST_F(LauncherTest, ARankKilledBySigkillGives137) {
  const std::string d = pid_dir.string();
  LaunchRun r = run(options(3),
                    {"pidfile", d, "@2", "wait-pids", d, "3", "@2", "signal", "9", "sleep", "30"});
  EXPECT_EQ(r.code, 137) << r.err;
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: rank 2 killed by signal 9 (SIGKILL)\n"));
  EXPECT_LT(r.seconds, 10) << "the other ranks were not stopped";
  ASSERT_EQ(pids().size(), 3u);
  expect_all_gone();
}

TEST_F(LauncherTest, ARankIgnoringSigtermIsKilledAfterTheGrace) {
  const std::string d = pid_dir.string();
  LaunchOptions o = options(2);
  o.kill_grace_s = 0.5;
  LaunchRun r = run(o, {"@0", "ignore-term", "pidfile", d, "@1", "wait-pids", d, "2", "@1", "exit",
                        "2", "sleep", "30"});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: rank 1 exited with code 2\n"));
  EXPECT_THAT(r.err,
              HasSubstr("runner-host launcher: rank 0 still running after 0.5 s: SIGKILL\n"));
  EXPECT_GE(r.seconds, 0.5);
  EXPECT_LT(r.seconds, 10);
  expect_all_gone();
}

TEST_F(LauncherTest, AWorkerThatCannotStartFailsTheLaunch) {
  LaunchOptions o = options(2);
  o.stdout_fd = open_output("out");
  o.stderr_fd = open_output("err");
  const int code = launch(o, {(dir / "no-such-program").string()});
  close(o.stdout_fd);
  close(o.stderr_fd);
  EXPECT_EQ(code, 127);
  EXPECT_THAT(rh::test::read_file(dir / "err"),
              HasSubstr("runner-host launcher: cannot start rank 0: execute "));
}

TEST_F(LauncherTest, SignalsToTheLauncherReachEveryWorker) {
  const std::pair<int, const char*> kSignals[] = {{SIGTERM, "SIGTERM"},
                                                  {SIGINT, "SIGINT"},
                                                  {SIGQUIT, "SIGQUIT"},
                                                  {SIGUSR1, "SIGUSR1"},
                                                  {SIGUSR2, "SIGUSR2"}};
  for (const auto& [sig, name] : kSignals) {
    SCOPED_TRACE(name);
    reset_pid_dir();
    const std::string d = pid_dir.string();
    // SIGTERM ignored: after SIGUSR1 the first rank to end stops the other
    // with SIGTERM, which must not overtake that rank's own SIGUSR1.
    const pid_t launcher = start_launcher_process(
        options(2), {"ignore-term", "trap", std::to_string(sig), "pidfile", d, "sleep", "30"});
    ASSERT_TRUE(wait_for_pids(2));
    ASSERT_EQ(kill(launcher, sig), 0);
    auto status = wait_child(launcher, 10);
    ASSERT_TRUE(status.has_value()) << "the launcher did not return";
    ASSERT_TRUE(WIFEXITED(*status));
    EXPECT_EQ(WEXITSTATUS(*status), 128 + sig);
    const std::string out = rh::test::read_file(dir / "out");
    const std::string err = rh::test::read_file(dir / "err");
    EXPECT_THAT(out, HasSubstr("[rank 0] got signal " + std::to_string(sig) + "\n")) << err;
    EXPECT_THAT(out, HasSubstr("[rank 1] got signal " + std::to_string(sig) + "\n")) << err;
    EXPECT_THAT(err, HasSubstr("runner-host launcher: forwarding " + std::string(name) +
                               " to the workers"));
    expect_all_gone();
  }
}

TEST_F(LauncherTest, SigusrWarnsTheWorkersWithoutStoppingThem) {
  // SLURM's preemption warning: the workers save a checkpoint and end on their
  // own. SIGUSR1 starts no grace period (rank 1 outlives it, then fails); the
  // first rank to end non-zero starts it for the others, with no SIGTERM (a
  // worker would take it as a second stop signal: end now, checkpoint or not).
  const std::string d = pid_dir.string();
  LaunchOptions o = options(2);
  o.kill_grace_s = 0.2;
  const pid_t launcher =
      start_launcher_process(o, {"note", "10", "trap", "15", "pidfile", d, "wait-signal", "10",
                                 "@1", "sleep", "1", "@1", "exit", "3", "sleep", "30"});
  ASSERT_TRUE(wait_for_pids(2));
  const auto t0 = Clock::now();
  ASSERT_EQ(kill(launcher, SIGUSR1), 0);
  auto status = wait_child(launcher, 20);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(status.has_value()) << "the launcher did not return";
  ASSERT_TRUE(WIFEXITED(*status));
  const std::string out = rh::test::read_file(dir / "out");
  const std::string err = rh::test::read_file(dir / "err");
  EXPECT_EQ(WEXITSTATUS(*status), 3) << err;
  EXPECT_THAT(out, HasSubstr("[rank 0] got signal 10\n"));
  EXPECT_THAT(out, HasSubstr("[rank 1] got signal 10\n"));
  EXPECT_THAT(out, Not(HasSubstr("got signal 15"))) << "a worker warned by SIGUSR1 got SIGTERM";
  EXPECT_THAT(err, HasSubstr("runner-host launcher: forwarding SIGUSR1 to the workers\n"));
  EXPECT_THAT(err, HasSubstr("runner-host launcher: rank 1 exited with code 3\n"));
  EXPECT_THAT(err, HasSubstr("runner-host launcher: stopping the other ranks (they were sent "
                             "SIGUSR1: SIGKILL after 0.2 s)\n"));
  EXPECT_THAT(err, HasSubstr("runner-host launcher: rank 0 still running after 0.2 s: SIGKILL\n"));
  EXPECT_THAT(err, Not(HasSubstr("rank 1 still running")));
  EXPECT_GE(seconds, 1);
  EXPECT_LT(seconds, 15);
  expect_all_gone();
}

TEST_F(LauncherTest, AWorkerIgnoringAForwardedSigtermIsKilledAfterTheGrace) {
  ScopedSubreaper subreaper;  // the workers' orphaned children come to this process
  const std::string d = pid_dir.string();
  LaunchOptions o = options(2);
  o.kill_grace_s = 0.5;
  const pid_t launcher =
      start_launcher_process(o, {"ignore-term", "spawn-child", d, "pidfile", d, "sleep", "30"});
  ASSERT_TRUE(wait_for_pids(2));
  const auto t0 = Clock::now();
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  auto status = wait_child(launcher, 15);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(status.has_value()) << "the launcher waited past the grace period";
  ASSERT_TRUE(WIFEXITED(*status));
  const std::string err = rh::test::read_file(dir / "err");
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGKILL) << err;
  EXPECT_THAT(err, HasSubstr("runner-host launcher: forwarding SIGTERM to the workers (SIGKILL "
                             "to those left after 0.5 s; Ctrl-C again to kill them now)\n"));
  EXPECT_THAT(err, HasSubstr("runner-host launcher: rank 0 still running after 0.5 s: SIGKILL\n"));
  EXPECT_THAT(err, HasSubstr("runner-host launcher: rank 1 still running after 0.5 s: SIGKILL\n"));
  EXPECT_GE(seconds, 0.5);
  EXPECT_LT(seconds, 15);
  expect_all_gone();
  // What the workers started (ignoring SIGTERM too) went with them.
  const std::vector<pid_t> children = pids("child.");
  ASSERT_EQ(children.size(), 2u);
  for (pid_t child : children) {
    auto child_status = wait_child(child, 5);
    ASSERT_TRUE(child_status.has_value()) << "a worker's child survived";
    EXPECT_TRUE(WIFSIGNALED(*child_status) && WTERMSIG(*child_status) == SIGKILL);
  }
}

TEST_F(LauncherTest, ASecondSigintKillsTheWorkersAtOnce) {
  const std::string d = pid_dir.string();
  LaunchOptions o = options(2);
  o.kill_grace_s = 60;  // far longer than the test may take
  const pid_t launcher = start_launcher_process(o, {"ignore", "2", "pidfile", d, "sleep", "30"});
  ASSERT_TRUE(wait_for_pids(2));
  ASSERT_EQ(kill(launcher, SIGINT), 0);
  // Two signals sent at once may arrive as one: the second after the first was seen.
  ASSERT_TRUE(wait_for_err("forwarding SIGINT to the workers"));
  ASSERT_EQ(kill(launcher, SIGINT), 0);
  auto status = wait_child(launcher, 15);
  ASSERT_TRUE(status.has_value()) << "a second SIGINT did not stop the workers";
  ASSERT_TRUE(WIFEXITED(*status));
  const std::string err = rh::test::read_file(dir / "err");
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGKILL) << err;
  EXPECT_THAT(err, HasSubstr("runner-host launcher: second SIGINT: SIGKILL to the workers\n"));
  EXPECT_THAT(err, ::testing::ContainsRegex(
                       "runner-host launcher: rank [01] killed by signal 9 \\(SIGKILL\\)\n"));
  expect_all_gone();
}

TEST_F(LauncherTest, AClosedStdoutDoesNotStopTheRun) {
  // `runner-host ... | head` once head has exited: writes to stdout fail.
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  close(fds[0]);
  const std::string d = pid_dir.string();
  // Each worker writes, then runs to the end of its script: rank 0's pid file
  // is its last act, rank 1 writes its own and fails once rank 0's is there.
  const pid_t launcher = start_launcher_process(
      options(2), {"out",        "one", "long",    "70000", "out", "two",       "err",
                   "still here", "@0",  "pidfile", d,       "@1",  "wait-pids", d,
                   "1",          "@1",  "pidfile", d,       "@1",  "exit",      "3"},
      {}, fds[1]);
  close(fds[1]);
  auto status = wait_child(launcher, 15);
  ASSERT_TRUE(status.has_value()) << "the launcher did not return";
  ASSERT_TRUE(WIFEXITED(*status)) << "the launcher was killed by signal " << WTERMSIG(*status);
  const std::string err = rh::test::read_file(dir / "err");
  EXPECT_EQ(WEXITSTATUS(*status), 3) << err;
  EXPECT_THAT(err, HasSubstr("runner-host launcher: stdout closed (Broken pipe): the workers' "
                             "further stdout is dropped\n"));
  EXPECT_THAT(err, HasSubstr("[rank 0] still here\n"));
  EXPECT_THAT(err, HasSubstr("[rank 1] still here\n"));
  EXPECT_THAT(err, HasSubstr("runner-host launcher: rank 1 exited with code 3\n"));
  EXPECT_EQ(pids().size(), 2u);
  expect_all_gone();
}

TEST_F(LauncherTest, WorkersStartWithTheDefaultDispositions) {
  // The launcher ignores SIGPIPE and handles the signals it forwards; none of
  // that may reach the workers (a worker ignoring SIGPIPE would spin on EPIPE).
  LaunchRun r = run(options(1), {"dispositions"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* name :
       {"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGCHLD", "SIGPIPE"})
    EXPECT_THAT(r.out, HasSubstr("[rank 0] " + std::string(name) + "=default\n"));
}

TEST_F(LauncherTest, AGroupIsKilledBeforeItsLeaderIsReaped) {
  ScopedSubreaper subreaper;  // the workers' orphaned children come to this process
  const std::string d = pid_dir.string();
  LaunchRun r;
  std::vector<std::string> late;
  std::vector<pid_t> groups;
  {
    rh::test::RecordProcessCalls record;
    // Rank 1 fails, rank 0 is stopped: both end with a child left in their group.
    r = run(options(2), {"spawn-child", d, "pidfile", d, "@1", "wait-pids", d, "2", "@1", "exit",
                         "3", "sleep", "30"});
    late = record.signals_after_reaping();
    groups = record.groups_signalled();
  }
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_THAT(late, IsEmpty()) << "a reaped worker's id was signalled (it may have been reused)";
  const std::vector<pid_t> workers = pids();
  ASSERT_EQ(workers.size(), 2u);
  for (pid_t pid : workers) EXPECT_THAT(groups, Contains(pid)) << "group " << pid << " not killed";
  // Rank 0's child goes with the SIGTERM to its group, rank 1's with the SIGKILL.
  for (pid_t child : pids("child.")) {
    auto status = wait_child(child, 5);
    ASSERT_TRUE(status.has_value()) << "a worker's child survived";
    EXPECT_TRUE(WIFSIGNALED(*status));
  }
}

TEST_F(LauncherTest, AnIgnoredSignalStaysIgnored) {
  const std::string d = pid_dir.string();
  const pid_t launcher = start_launcher_process(options(2), {"pidfile", d, "sleep", "30"},
                                                [] { signal(SIGHUP, SIG_IGN); });  // nohup
  ASSERT_TRUE(wait_for_pids(2));
  ASSERT_EQ(kill(launcher, SIGHUP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int status = 0;
  EXPECT_EQ(waitpid(launcher, &status, WNOHANG), 0) << "SIGHUP stopped the launcher";
  for (pid_t pid : pids()) EXPECT_FALSE(gone(pid)) << "SIGHUP stopped a worker";
  ASSERT_EQ(kill(launcher, SIGTERM), 0);
  auto end = wait_child(launcher, 10);
  ASSERT_TRUE(end.has_value());
  EXPECT_TRUE(WIFEXITED(*end) && WEXITSTATUS(*end) == 128 + SIGTERM);
  EXPECT_THAT(rh::test::read_file(dir / "err"), Not(HasSubstr("SIGHUP")));
  expect_all_gone();
}

TEST_F(LauncherTest, WorkersDieWithAKilledLauncher) {
  ScopedSubreaper subreaper;  // the orphaned workers come to this process
  const std::string d = pid_dir.string();
  const pid_t launcher =
      start_launcher_process(options(2), {"ignore-term", "pidfile", d, "sleep", "30"});
  ASSERT_TRUE(wait_for_pids(2));
  ASSERT_EQ(kill(launcher, SIGKILL), 0);
  ASSERT_TRUE(wait_child(launcher, 10).has_value());
  for (pid_t pid : pids()) {
    auto status = wait_child(pid, 5);  // PR_SET_PDEATHSIG: SIGKILL at once
    ASSERT_TRUE(status.has_value()) << "worker " << pid << " survived its launcher";
    EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
    EXPECT_TRUE(gone(pid));
  }
}

TEST_F(LauncherTest, WhatAWorkerLeavesBehindIsKilled) {
  ScopedSubreaper subreaper;  // the worker's orphaned child comes to this process
  const std::string d = pid_dir.string();
  LaunchRun r = run(options(1), {"spawn-child", d, "out", "done"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("[rank 0] done\n"));
  const std::vector<pid_t> children = pids("child.");
  ASSERT_EQ(children.size(), 1u);
  auto status = wait_child(children[0], 5);
  ASSERT_TRUE(status.has_value()) << "the worker's child survived";
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGKILL);
}

TEST_F(LauncherTest, SignalHandlingIsRestoredAfterwards) {
  const int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE};
  struct sigaction before[NSIG] {};
  for (int sig : kSignals) sigaction(sig, nullptr, &before[sig]);
  LaunchRun r = run(options(1), {"out", "x"});
  ASSERT_EQ(r.code, 0);
  for (int sig : kSignals) {
    struct sigaction after {};
    sigaction(sig, nullptr, &after);
    EXPECT_EQ(before[sig].sa_handler, after.sa_handler) << "signal " << sig;
  }
}

TEST_F(LauncherTest, BadOptionsStartNothing) {
  auto expect_invalid = [&](LaunchOptions o, const std::string& text) {
    try {
      launch(o, worker({"out", "started"}));
      ADD_FAILURE() << "no error for: " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr(text));
    }
  };
  LaunchOptions o = options(0);
  expect_invalid(o, "--nproc-per-node: expected 1 or more, got 0");
  o = options(2);
  o.nnodes = 2;
  o.master_port = 0;
  expect_invalid(o, "--master-port 0 (pick a free port) needs --nnodes 1");
  o.master_port = 29500;
  o.node_rank = 2;
  expect_invalid(o, "--node-rank: expected 0 to 1");
  o = options(1);
  o.master_port = 70000;
  expect_invalid(o, "--master-port: expected 0 to 65535");
  try {
    launch(options(1), {});
    ADD_FAILURE() << "no error for an empty command";
  } catch (const std::invalid_argument&) {
  }
}

// ---- Elastic restart (--max-restarts): the launcher's loop, with a scripted
// rendezvous in place of the store (comm/ElasticRendezvous is tested through
// runner-host in elastic_restart.sh and tests/multinode/elastic.sh).

// Closes each round with the nodes `worlds` gives it (the last one again
// past its end), or throws `refuse` for rounds from `refuse_from`; another
// node's failure appears `elsewhere_after_s` into round `elsewhere_round`.
class ScriptedAgent final : public rh::launch::ElasticAgent {
 public:
  struct Log {
    std::vector<int> joined;
    std::vector<std::pair<int, std::string>> reported;
  };
  ScriptedAgent(std::vector<std::vector<int>> worlds, Log& log)
      : worlds_(std::move(worlds)), log_(log) {}
  rh::launch::ElasticWorld join(int round) override {
    log_.joined.push_back(round);
    if (refuse_from >= 0 && round >= refuse_from) throw std::runtime_error(refuse);
    rh::launch::ElasticWorld w;
    w.nodes = worlds_[std::min<size_t>(static_cast<size_t>(round), worlds_.size() - 1)];
    w.node_rank = 0;
    round_start_ = Clock::now();
    return w;
  }
  std::optional<std::string> failure(int round) override {
    if (round == elsewhere_round &&
        Clock::now() - round_start_ > std::chrono::duration<double>(elsewhere_after_s))
      return elsewhere;
    return std::nullopt;
  }
  void report_failure(int round, const std::string& what) override {
    log_.reported.emplace_back(round, what);
  }

  int refuse_from = -1;
  std::string refuse;
  int elsewhere_round = -1;
  double elsewhere_after_s = 0;
  std::string elsewhere;

 private:
  std::vector<std::vector<int>> worlds_;
  Log& log_;
  Clock::time_point round_start_{};
};

class ElasticLaunchTest : public LauncherTest {
 protected:
  ScriptedAgent::Log log;
  std::function<void(ScriptedAgent&)> setup = [](ScriptedAgent&) {};
  std::vector<std::vector<int>> worlds = {{0, 1}, {0}};

  // Node 0 of 2, 2 ranks each, with up to `restarts` restarts.
  LaunchOptions elastic(int restarts) {
    LaunchOptions o = options(2);
    o.nnodes = 2;
    o.master_port = rh::launch::pick_free_port("127.0.0.1");
    o.max_restarts = restarts;
    o.min_nodes = 1;
    o.host = "this-host";
    return o;
  }

  LaunchRun run_elastic(LaunchOptions o, const std::vector<std::string>& script) {
    LaunchRun r;
    o.stdout_fd = open_output("out");
    o.stderr_fd = open_output("err");
    r.code = launch(o, worker(script), [this](const rh::launch::ElasticAgentOptions& a) {
      EXPECT_EQ(a.nnodes, 2);
      EXPECT_EQ(a.min_nodes, 1);
      EXPECT_EQ(a.host, "this-host");
      auto agent = std::make_unique<ScriptedAgent>(worlds, log);
      setup(*agent);
      return agent;
    });
    close(o.stdout_fd);
    close(o.stderr_fd);
    r.out = rh::test::read_file(dir / "out");
    r.err = rh::test::read_file(dir / "err");
    return r;
  }
};

// A worker that fails ends the round; the failure is reported to the other
// nodes, and the next round runs on the world the rendezvous closed it
// with: fewer ranks, the restart count, the first world's size (for the
// global batch) and when the failure was seen (for the time to recover).
TEST_F(ElasticLaunchTest, AFailedWorkerRestartsEveryWorkerOnTheNextRoundsWorld) {
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const LaunchRun r =
      run_elastic(elastic(2), {"#0", "@1", "exit", "3", "#0", "sleep", "30", "env"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(log.joined, (std::vector<int>{0, 1}));
  ASSERT_EQ(log.reported.size(), 1u) << r.err;
  EXPECT_EQ(log.reported[0].first, 0);
  EXPECT_EQ(log.reported[0].second, "node 0 (this-host): rank 1 exited with code 3");
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: restart 1 of 2: nodes 0 (were 0, 1), 2 "
                               "rank(s); this is node 0, node rank 0 now"));
  // Round 1's workers: 2 ranks of a world of 2 (was 4), restart 1.
  EXPECT_THAT(lines_of(r.out, "[rank 1] WORLD_SIZE="), Contains("2"));
  EXPECT_THAT(lines_of(r.out, "[rank 0] TORCHELASTIC_RESTART_COUNT="), Contains("1"));
  EXPECT_THAT(lines_of(r.out, "[rank 0] TORCHELASTIC_USE_AGENT_STORE="), Contains("True"));
  EXPECT_THAT(lines_of(r.out, "[rank 0] TORCHELASTIC_MAX_RESTARTS="), Contains("2"));
  EXPECT_THAT(lines_of(r.out, "[rank 0] RH_ELASTIC_BASE_WORLD_SIZE="), Contains("4"));
  const auto at = lines_of(r.out, "[rank 0] RH_ELASTIC_DETECTED_AT=");
  ASSERT_EQ(at.size(), 1u) << r.out;
  EXPECT_GE(std::stod(at[0]), before);
  EXPECT_LE(std::stod(at[0]), before + 60);
}

// Another node's failure stops this node's workers (SIGTERM), which then
// restart with the others; this node reports nothing of its own.
TEST_F(ElasticLaunchTest, AnotherNodesFailureStopsThisNodesWorkersForTheNextRound) {
  setup = [](ScriptedAgent& a) {
    a.elsewhere_round = 0;
    a.elsewhere_after_s = 0.3;
    a.elsewhere = "node 1 (other-host): rank 2 exited with code 1";
  };
  const LaunchRun r = run_elastic(
      elastic(1), {"#0", "pidfile", pid_dir.string(), "#0", "sleep", "30", "#1", "out", "round 1"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: another node failed (node 1 (other-host): "
                               "rank 2 exited with code 1): stopping this node's workers"));
  EXPECT_TRUE(log.reported.empty());
  EXPECT_EQ(log.joined, (std::vector<int>{0, 1}));
  EXPECT_EQ(lines_of(r.out, "[rank 0] ").size(), 1u) << r.out;
  EXPECT_THAT(lines_of(r.out, "[rank 1] "), Contains("round 1"));
}

// The restarts run out: the job ends with the last failure's code.
TEST_F(ElasticLaunchTest, NoRestartLeftEndsTheJob) {
  const LaunchRun r = run_elastic(elastic(1), {"@0", "exit", "5", "sleep", "30"});
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(log.joined, (std::vector<int>{0, 1}));
  EXPECT_EQ(log.reported.size(), 2u);
  EXPECT_THAT(r.err, HasSubstr("no restart left (--max-restarts 1): the job ends"));
}

// A stop signal is the user's (or SLURM's): it is not undone by a restart.
TEST_F(ElasticLaunchTest, AStopSignalEndsTheJobWithoutARestart) {
  const LaunchRun r =
      run_elastic(elastic(3), {"trap", "15", "@0", "kill-launcher", "15", "sleep", "30"});
  EXPECT_EQ(r.code, 128 + SIGTERM) << r.err;
  EXPECT_EQ(log.joined, (std::vector<int>{0}));
  EXPECT_TRUE(log.reported.empty());
}

// A round that cannot go on (fewer than --min-nodes) ends the job, saying why.
TEST_F(ElasticLaunchTest, ARoundRefusedEndsTheJobSayingWhy) {
  setup = [](ScriptedAgent& a) {
    a.refuse_from = 1;
    a.refuse = "round 1 of the elastic rendezvous has 1 node(s) (0), fewer than --min-nodes 2";
  };
  const LaunchRun r = run_elastic(elastic(2), {"#0", "exit", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("runner-host launcher: node 0: round 1 of the elastic rendezvous "
                               "has 1 node(s) (0), fewer than --min-nodes 2"));
}

TEST_F(LauncherTest, ElasticOptionsAreChecked) {
  LaunchOptions o = options(1);
  o.min_nodes = 1;
  try {
    launch(o, worker({"out", "x"}));
    ADD_FAILURE() << "--min-nodes without --max-restarts";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("--min-nodes 1 needs --max-restarts"));
  }
  o = options(1);
  o.max_restarts = 1;
  try {
    launch(o, worker({"out", "x"}));
    ADD_FAILURE() << "--max-restarts without a rendezvous";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("--max-restarts needs the elastic rendezvous"));
  }
  o.nnodes = 2;
  o.master_port = 29500;
  o.min_nodes = 3;
  try {
    launch(o, worker({"out", "x"}), [](const rh::launch::ElasticAgentOptions&) {
      return std::unique_ptr<rh::launch::ElasticAgent>();
    });
    ADD_FAILURE() << "--min-nodes above --nnodes";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("--min-nodes: expected 1 to --nnodes 2, got 3"));
  }
}

TEST(PickFreePort, BindsOnTheGivenAddress) {
  const int port = rh::launch::pick_free_port("127.0.0.1");
  EXPECT_GT(port, 0);
  EXPECT_THROW(rh::launch::pick_free_port("no-such-host.invalid"), std::runtime_error);
}

}  // namespace
