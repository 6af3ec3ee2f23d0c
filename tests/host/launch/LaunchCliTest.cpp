// runner-host --nproc-per-node N, end to end: the program re-executes itself
// once per rank, without the launcher flags, and the workers do not launch.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/TestUtil.hpp"
#include "host/launch/Listener.hpp"

extern char** environ;

using rh::test::quote;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

rh::test::CommandResult run(const std::string& args, const std::string& env = "") {
  return rh::test::run_command("env -u RH_LAUNCHED -u RANK -u WORLD_SIZE " + env + " " +
                               quote(RH_RUNNER_HOST) + " " + args);
}

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(LaunchCli, TwoRanksPrintTheVersionOnceEach) {
  for (const std::string flags : {"--nproc-per-node 2", "--nproc-per-node=2 --master-port=0",
                                  "--nproc 2 --master-addr localhost --master-port 0"}) {
    SCOPED_TRACE(flags);
    auto r = run(flags + " --version");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(count(r.output, std::regex("\\[rank 0\\] runner-host [0-9.]+ \\(ABI ")), 1)
        << r.output;
    EXPECT_EQ(count(r.output, std::regex("\\[rank 1\\] runner-host [0-9.]+ \\(ABI ")), 1)
        << r.output;
    EXPECT_EQ(count(r.output, std::regex("runner-host [0-9.]+ \\(ABI ")), 2) << r.output;
  }
}

// A worker's exit code is the launcher's: here the training set's file is
// missing, which the workers find when they build their loaders (the job
// itself is valid, so the check before launch lets it through).
TEST(LaunchCli, WorkersFailingGiveTheirCode) {
  rh::test::TempDir dir;
  dir.write("job.yaml",
            "model: {type: mlp, in_features: 2, num_classes: 2}\ntrain_cfg: {max_epochs: 1}\n"
            "strategy: {type: ddp}\ndata:\n  train: {dataset: {type: csv, path: missing.csv, "
            "label_column: 2}, batch_size: 2}\n");
  auto r = run("--nproc-per-node 2 --master-port 0 --config " + quote((dir / "job.yaml").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\\[rank [01]\\] runner-host: error: "));
  EXPECT_THAT(r.output,
              ::testing::ContainsRegex("runner-host launcher: rank [01] exited with code 2"));
}

// A job that cannot run at all (here: no such file) is refused once: local
// rank 0 says so through the launch gate (launch/LaunchGate.hpp), the other
// rank ends without a word.
TEST(LaunchCli, AnInvalidJobIsRefusedBeforeAnyRankIsLaunched) {
  rh::test::TempDir dir;
  auto r = run("--nproc-per-node 2 --config " + quote((dir / "missing.yaml").string()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("runner-host: error: "));
  EXPECT_THAT(r.output, HasSubstr("missing.yaml"));
  EXPECT_THAT(r.output, Not(HasSubstr("[rank "))) << "a rank was launched";
  EXPECT_THAT(r.output, Not(HasSubstr("launcher"))) << r.output;
}

TEST(LaunchCli, BadLauncherOptions) {
  auto r = run("--nproc-per-node 0 --version");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--nproc-per-node: expected 1 or more, got 0"));
  r = run("--nnodes 2 --master-port 0 --version");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--master-port 0 (pick a free port) needs --nnodes 1"));
  r = run("--nnodes 2 --node-rank 2 --version");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--node-rank: expected 0 to 1"));
}

TEST(LaunchCli, AClosedStdoutDoesNotKillTheRun) {
  // `runner-host --nproc-per-node 2 ... | head` once head has exited, made
  // certain: stdout is a pipe whose read end is closed before the start.
  rh::test::TempDir dir;
  const std::string err_path = (dir / "err").string();
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  close(fds[0]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  // The test's own SIGPIPE disposition (default, or ignored) must not decide it.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  std::vector<std::string> args = {RH_RUNNER_HOST, "--nproc-per-node", "2", "--version"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // This environment less what would make runner-host a launched worker.
  std::vector<char*> envp;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    if (name != "RH_LAUNCHED" && name != "RANK" && name != "WORLD_SIZE") envp.push_back(*e);
  }
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, RH_RUNNER_HOST, &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  ASSERT_EQ(spawned, 0);
  int status = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() >= until) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "runner-host did not end within 30 s";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string err = rh::test::read_file(dir / "err");
  ASSERT_TRUE(WIFEXITED(status)) << "runner-host was killed by signal " << WTERMSIG(status) << "\n"
                                 << err;
  EXPECT_EQ(WEXITSTATUS(status), 0) << err;
  EXPECT_THAT(err, HasSubstr("runner-host launcher: stdout closed (Broken pipe)"));
}

using rh::test::Listener;

// Issue 31, item 8: a port given that another job's store listens on is
// refused by the launcher before any worker starts, naming --master-port.
TEST(LaunchCli, ATakenPortIsRefusedNamingMasterPort) {
  Listener other_job;
  auto r =
      run("--nproc-per-node 2 --master-port " + std::to_string(other_job.port()) + " --version",
          "-u MASTER_PORT -u MASTER_ADDR");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("runner-host: error: port " + std::to_string(other_job.port()) +
                                  " on 127.0.0.1 (from --master-port) is taken"));
  EXPECT_THAT(r.output, HasSubstr("Give this job a port of its own with --master-port PORT"));
  EXPECT_THAT(r.output, Not(HasSubstr("[rank ")));
}

// Issue 31, item 3: the job's dist.master_port reaches the launcher; the
// launcher's environment (MASTER_PORT) and then its flag win over it. Each
// is shown by the port the refusal names as taken and where it came from.
TEST(LaunchCli, TheJobsMasterPortReachesTheLauncherAndLosesToEnvironmentAndFlag) {
  rh::test::TempDir dir;
  Listener taken;
  Listener taken_too;
  const std::string job = (dir / "job.yaml").string();
  dir.write("job.yaml",
            "model: {type: mlp, in_features: 4, num_classes: 2}\n"
            "dist: {timeout_s: 20, master_port: " +
                std::to_string(taken.port()) + "}\n");
  auto r = run("--nproc-per-node 2 --config " + quote(job) + " --print-config",
               "-u MASTER_PORT -u MASTER_ADDR");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("port " + std::to_string(taken.port()) +
                        " on 127.0.0.1 (from dist.master_port at " + job + ":2:36) is taken"));
  // --set reaches it as it reaches the workers.
  r = run("--nproc-per-node 2 --config " + quote(job) +
              " --set dist.master_port=" + std::to_string(taken_too.port()) + " --print-config",
          "-u MASTER_PORT -u MASTER_ADDR");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("port " + std::to_string(taken_too.port()) +
                                  " on 127.0.0.1 (from dist.master_port"));
  // MASTER_PORT over the job's key.
  r = run("--nproc-per-node 2 --config " + quote(job) + " --print-config",
          "-u MASTER_ADDR MASTER_PORT=" + std::to_string(taken_too.port()));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("port " + std::to_string(taken_too.port()) +
                                  " on 127.0.0.1 (from MASTER_PORT) is taken"));
  // --master-port over both: a free port, and the workers run.
  r = run("--nproc-per-node 2 --master-port 0 --config " + quote(job) + " --print-config",
          "-u MASTER_ADDR MASTER_PORT=" + std::to_string(taken_too.port()));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 1] dist:"));
}

// Each process sets its OpenMP threads to wait passively beside OpenBLAS's
// own pool (launch/ThreadPolicy.hpp), the workers of a launch too, and says
// so at debug level; an OMP_WAIT_POLICY of the environment stands.
TEST(LaunchCli, OpenMpThreadsWaitPassivelyUnlessTheEnvironmentChooses) {
  rh::test::TempDir dir;
  const std::string job = (dir / "job.yaml").string();
  dir.write("job.yaml", "model: {type: mlp, in_features: 4, num_classes: 2}\n");
  const std::string said = "threads: OpenMP threads wait passively (OMP_WAIT_POLICY=PASSIVE)";
  auto r = run("--nproc-per-node 2 --log-level debug --print-config --config " + quote(job),
               "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // tools/install-deps.sh installs OpenBLAS with its own threads
  // (libopenblas0-pthread): its libblas.so.3 is what LibTorch links.
  EXPECT_EQ(count(r.output, std::regex("\\[rank [01]\\] .*" +
                                       std::regex_replace(said, std::regex("[()]"), "\\$&"))),
            2)
      << r.output;
  r = run("--log-level debug --print-config --config " + quote(job), "OMP_WAIT_POLICY=ACTIVE");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("threads: OpenMP")));
}

TEST(LaunchCli, ALaunchedWorkerDoesNotLaunchAgain) {
  auto r = run("--nproc-per-node 2 --version", "RH_LAUNCHED=1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("a launch cannot be nested"));
}

}  // namespace
