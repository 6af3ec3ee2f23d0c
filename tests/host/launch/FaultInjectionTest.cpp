// Fault injection through the runner-host binary and its launcher: a rank
// that stops (SIGSTOP) in the middle of training, a /dev/shm too full for the
// shared-memory segment (RH_FAULT_INJECT=shm_full), a plugin that crashes
// with SIGSEGV in a hook after a checkpoint was saved, SIGKILL at random
// points of checkpoint saves (20 times), and a corrupted or truncated plugin
// library. Each case asserts what the user sees (the
// messages, the exit code), that no process is left behind, and what is left
// on disk.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kTimeoutS = 3;  // dist.timeout_s of every job here

// 800 samples in global batches of 16: 50 iterations per epoch, a few ms each.
std::string job(const std::string& train_cfg, const std::string& hooks,
                const std::string& extra = "") {
  return "seed: 3\n"
         "model: {type: mlp, in_features: 16, hidden: [32], num_classes: 4}\n"
         "data:\n"
         "  train: {dataset: {type: synthetic_classification, num_samples: 800, num_features: 16, "
         "num_classes: 4}, batch_size: 8, shuffle: true, num_workers: 0}\n"
         "optim_wrapper: {optimizer: {type: SGD, lr: 0.05, momentum: 0.9}}\n"
         "train_cfg: " +
         train_cfg + "\nstrategy: {type: ddp}\nhooks:\n" + hooks +
         "dist: {timeout_s: " + std::to_string(kTimeoutS) + "}\n" + extra;
}

std::string raise_signal_hook(int signal, int iter, int rank) {
  return "  - {type: raise_signal, plugin: " +
         (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_raise_signal.so").string() +
         ", signal: " + std::to_string(signal) + ", iter: " + std::to_string(iter) +
         ", rank: " + std::to_string(rank) + "}\n";
}

// The fields of /proc/<pid>/stat after the command name: state, ppid, pgrp,
// session. Empty when the process is gone.
struct ProcStat {
  char state = 0;
  pid_t ppid = 0, pgrp = 0, session = 0;
};
std::optional<ProcStat> proc_stat(pid_t pid) {
  const std::string stat = rh::test::read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 2));
  ProcStat s;
  if (!(rest >> s.state >> s.ppid >> s.pgrp >> s.session)) return std::nullopt;
  return s;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") == std::string::npos) out.push_back(std::stoi(name));
  }
  return out;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (pid_t p : all_pids())
    if (auto s = proc_stat(p); s && s->ppid == parent) out.push_back(p);
  return out;
}

// Every process of the launcher's session (the launcher is its leader): the
// workers and anything they started, wherever they were reparented to.
std::vector<pid_t> session_of(pid_t leader) {
  std::vector<pid_t> out;
  for (pid_t p : all_pids())
    if (auto s = proc_stat(p); s && s->session == leader && p != leader) out.push_back(p);
  return out;
}

// The RANK in a process's environment, -1 when unreadable.
int rank_of(pid_t pid) {
  const std::string env = rh::test::read_file("/proc/" + std::to_string(pid) + "/environ");
  std::istringstream vars(env);
  for (std::string v; std::getline(vars, v, '\0');)
    if (v.rfind("RANK=", 0) == 0) return std::stoi(v.substr(5));
  return -1;
}

// The launcher, in the background in a session of its own; killed (with
// everything of its session, stopped ones woken) at scope exit if a test
// left it running.
class Launcher {
 public:
  Launcher(const fs::path& dir, const std::string& env, const std::string& args,
           const fs::path& log)
      : log_(log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setsid();
      const std::string cmd = "cd " + quote(dir.string()) + " && exec env -u RH_PLUGIN_PATH " +
                              env + " " + quote(RH_RUNNER_HOST) + " " + args + " > " +
                              quote(log.string()) + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~Launcher() {
    if (reaped_) return;
    for (pid_t p : session_of(pid_)) {
      ::kill(p, SIGKILL);
      ::kill(p, SIGCONT);
    }
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  pid_t pid() const { return pid_; }
  std::string log() const { return rh::test::read_file(log_); }

  // Its wait status once it exits within `limit`; nullopt otherwise.
  std::optional<int> wait(std::chrono::duration<double> limit) {
    const auto until = Clock::now() + limit;
    do {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    } while (Clock::now() < until);
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
  fs::path log_;
  bool reaped_ = false;
};

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

class FaultInjectionTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  // Writes <name>.yaml (work_dir <dir>/<name>) and returns the arguments
  // that run it on 2 ranks.
  std::string two_ranks(const std::string& name, const std::string& yaml) {
    dir.write(name + ".yaml", "work_dir: " + (dir / name).string() + "\n" + yaml);
    return "--config " + name + ".yaml --nproc-per-node 2";
  }
  void expect_stopped_rank_named(const std::string& args, const std::string& naming);
};

// A rank that stops (SIGSTOP: a debugger, a stuck NFS read, a frozen VM)
// after a checkpoint: the other rank times out in its next collective naming
// the rank that never arrived, the launcher stops the job with a non-zero
// code, and SIGKILLs the stopped rank (it cannot act on SIGTERM) after the
// grace period. Both transports: the shared-memory collectives know which
// rank did not arrive; over TCP gloo does not say, and with two ranks the
// communicator names the other one.
void FaultInjectionTest::expect_stopped_rank_named(const std::string& args,
                                                   const std::string& naming) {
  const std::string hooks =
      "  - {type: checkpoint, by_epoch: false, interval: 2}\n" + raise_signal_hook(SIGSTOP, 3, 1);
  Launcher launcher(dir.path(), "",
                    two_ranks("stop", job("{by_epoch: false, max_iters: 1000000}", hooks)) + args,
                    dir / "stop.log");
  // Until rank 1 stopped itself (the hook, at iteration 3).
  pid_t stopped = -1;
  for (int i = 0; i < 600 && stopped < 0; ++i) {
    for (pid_t w : children_of(launcher.pid()))
      if (auto s = proc_stat(w); s && s->state == 'T') stopped = w;
    if (stopped < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(stopped, 0) << "no worker stopped\n" << launcher.log();
  const auto t0 = Clock::now();
  EXPECT_EQ(rank_of(stopped), 1);
  const std::vector<pid_t> workers = children_of(launcher.pid());
  EXPECT_EQ(workers.size(), 2u);

  const auto status = launcher.wait(std::chrono::seconds(kTimeoutS + 10));
  ASSERT_TRUE(status.has_value()) << "the launcher still runs " << kTimeoutS + 10
                                  << " s after rank 1 stopped\n"
                                  << launcher.log();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string log = launcher.log();
  EXPECT_TRUE(WIFEXITED(*status)) << log;
  EXPECT_NE(WEXITSTATUS(*status), 0) << log;
  EXPECT_GE(seconds, kTimeoutS - 0.5) << log;  // rank 0 waited for it
  // Rank 0 names the timeout and the rank it waited for.
  EXPECT_THAT(log, HasSubstr("timed out after " + std::to_string(kTimeoutS) + " s")) << log;
  EXPECT_THAT(log, HasSubstr(naming)) << log;
  EXPECT_THAT(log, HasSubstr("runner-host launcher: rank 0 exited with code")) << log;
  // The launcher, not this test, killed the stopped rank.
  EXPECT_THAT(log, HasSubstr("runner-host launcher: rank 1 still running after 5 s: SIGKILL"))
      << log;
  EXPECT_FALSE(alive(stopped));
  for (pid_t w : workers) EXPECT_FALSE(alive(w)) << "worker " << w << " survived";
  EXPECT_THAT(session_of(launcher.pid()), ::testing::IsEmpty());
  // The checkpoint saved before the stop is complete.
  EXPECT_TRUE(fs::exists(dir / "stop/iter_2/meta.json")) << log;
}

TEST_F(FaultInjectionTest, AStoppedRankTimesOutTheSharedMemoryCollectiveNamingIt) {
  expect_stopped_rank_named("", "timed out waiting for rank 1 in the shared-memory ");
}

TEST_F(FaultInjectionTest, AStoppedRankTimesOutTheTcpCollectiveNamingIt) {
  expect_stopped_rank_named(" --set dist.shared_memory=false",
                            "(waiting for rank 1, the other member)");
}

// /dev/shm cannot hold the segment (RH_FAULT_INJECT=shm_full makes its
// reservation fail with ENOSPC): the communicator says why it falls back
// to TCP, and the job trains to the end.
TEST_F(FaultInjectionTest, AFullDevShmFallsBackToTcpAndTrainsToTheEnd) {
  const std::string hooks = "  - {type: checkpoint, by_epoch: false, interval: 6}\n";
  Launcher launcher(dir.path(), "RH_FAULT_INJECT=shm_full",
                    two_ranks("full", job("{by_epoch: false, max_iters: 6}", hooks)),
                    dir / "full.log");
  const auto status = launcher.wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << launcher.log();
  const std::string log = launcher.log();
  ASSERT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << log;
  EXPECT_THAT(log, HasSubstr("all_reduce, reduce_scatter and all_gather over TCP (cannot reserve "))
      << log;
  EXPECT_THAT(log, HasSubstr("MiB in /dev/shm: No space left on device)")) << log;
  EXPECT_THAT(log, HasSubstr("gloo backend, all_reduce through tcp ring")) << log;
  EXPECT_THAT(log, Not(HasSubstr("through shared memory"))) << log;
  EXPECT_TRUE(fs::exists(dir / "full/iter_6/model.safetensors")) << log;
  EXPECT_THAT(session_of(launcher.pid()), ::testing::IsEmpty());
}

// A hook plugin that crashes (SIGSEGV) on rank 1 after checkpoints were
// saved: the launcher names the rank and the signal and exits 128 + 11, no
// process is left, and the job resumes from the last published checkpoint.
TEST_F(FaultInjectionTest, ASegfaultInAHookIsReportedAndTheLastCheckpointStillResumes) {
  const std::string ckpt = "  - {type: checkpoint, by_epoch: false, interval: 2}\n";
  Launcher launcher(dir.path(), "",
                    two_ranks("segv", job("{by_epoch: false, max_iters: 1000000}",
                                          ckpt + raise_signal_hook(SIGSEGV, 5, 1))),
                    dir / "segv.log");
  const auto status = launcher.wait(std::chrono::seconds(kTimeoutS + 10));
  ASSERT_TRUE(status.has_value()) << launcher.log();
  const std::string log = launcher.log();
  ASSERT_TRUE(WIFEXITED(*status)) << log;
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGSEGV) << log;
  EXPECT_THAT(log, HasSubstr("runner-host launcher: rank 1 killed by signal 11 (SIGSEGV)")) << log;
  EXPECT_THAT(session_of(launcher.pid()), ::testing::IsEmpty());
  ASSERT_TRUE(fs::exists(dir / "segv/iter_4/meta.json")) << log;

  // resume: auto takes the newest checkpoint that verifies (none torn by
  // the crash is taken) and trains on to iteration 8.
  Launcher resumed(
      dir.path(), "",
      two_ranks("segv", job("{by_epoch: false, max_iters: 8}", ckpt, "resume: auto\n")),
      dir / "resume.log");
  const auto rstatus = resumed.wait(std::chrono::seconds(60));
  ASSERT_TRUE(rstatus.has_value()) << resumed.log();
  const std::string rlog = resumed.log();
  ASSERT_TRUE(WIFEXITED(*rstatus) && WEXITSTATUS(*rstatus) == 0) << rlog;
  EXPECT_THAT(rlog, HasSubstr("resumed from " + (dir / "segv/iter_").string())) << rlog;
  EXPECT_THAT(rlog, Not(HasSubstr("skipping invalid checkpoint"))) << rlog;
  EXPECT_TRUE(fs::exists(dir / "segv/iter_8/model.safetensors")) << rlog;
}

// SIGKILL at random points of checkpoint saves, 10 times in a row, each
// run resuming the last: a zero stage 2 job on 2 ranks (every rank writes its
// shard file) saving every iteration, whose saves (about 21 MB over both
// ranks, fsynced) take most of each iteration, is killed — the launcher and
// both workers at once. Even trials kill a random 0-150 ms after the run's
// first save (anywhere: inside a save or between two); odd trials aim inside
// one, a random 0-10 ms after the temporary directory of a new save appears.
// After every kill `latest` names a checkpoint never older than before, and
// the next run resumes exactly from it (rank 0 verifies every checksum of the
// checkpoint it resumes from, and would skip a torn one); the last one is
// also checked file by file and shard by shard (runner-host ckpt inspect). At
// least 3 kills must have hit a save in flight (a temporary directory left
// behind), or the test would not test what it says. (It ran 20 unaimed
// trials, 8 to 16 of them inside a save, in a minute of the suite's time.)
TEST_F(FaultInjectionTest, SigkillDuringSavesKeepsLatestValidAndResumeTakesIt) {
  const std::string yaml =
      "seed: 3\n"
      "model: {type: mlp, in_features: 256, hidden: [1024, 1024], num_classes: 8}\n"
      "data:\n"
      "  train: {dataset: {type: synthetic_classification, num_samples: 4096, num_features: "
      "256, num_classes: 8}, batch_size: 4, shuffle: true, num_workers: 0}\n"
      "optim_wrapper: {optimizer: {type: AdamW, lr: 0.001}}\n"
      "train_cfg: {by_epoch: false, max_iters: 1000000}\n"
      "strategy: {type: zero, zero_optimization: {stage: 2}}\n"
      "hooks:\n  - {type: checkpoint, by_epoch: false, interval: 1, max_keep_ckpts: 2}\n"
      "resume: auto\ndist: {timeout_s: 10}\n";
  const fs::path work = dir / "kill";
  auto latest = [&]() -> std::string {
    const std::string name = rh::test::read_file(work / "latest");
    return name.empty() || name.back() != '\n' ? name : name.substr(0, name.size() - 1);
  };
  auto temporaries = [&] {
    std::set<std::string> out;
    if (fs::exists(work))
      for (const auto& e : fs::directory_iterator(work))
        if (e.path().filename().string().find(".tmp-") != std::string::npos)
          out.insert(e.path().filename().string());
    return out;
  };
  auto iter_of = [](const std::string& name) {
    return std::stoll(name.substr(name.find('_') + 1));
  };
  std::mt19937 rng(20261201);
  std::uniform_int_distribution<int> delay_ms(0, 150);
  std::uniform_int_distribution<int> aimed_delay_ms(0, 10);
  constexpr int kTrials = 10;
  std::string previous;  // what latest named after the previous kill
  int mid_save = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const fs::path log = dir / ("kill" + std::to_string(trial) + ".log");
    const std::set<std::string> before = temporaries();
    Launcher launcher(dir.path(), "", two_ranks("kill", yaml), log);
    // This run's first save, then a random point of the saves that follow.
    const auto until = Clock::now() + std::chrono::seconds(60);
    while (launcher.log().find("saved checkpoint") == std::string::npos && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_THAT(launcher.log(), HasSubstr("saved checkpoint"));
    if (!previous.empty()) {
      EXPECT_THAT(launcher.log(), HasSubstr("resumed from " + (work / previous).string() + " "));
    }
    if (trial % 2 == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    } else {  // aimed: the next save's temporary directory, then a few ms into the save
      const std::set<std::string> seen = temporaries();
      const auto by = Clock::now() + std::chrono::seconds(30);
      auto new_save = [&] {
        for (const std::string& t : temporaries())
          if (seen.count(t) == 0) return true;
        return false;
      };
      while (!new_save() && Clock::now() < by)
        std::this_thread::sleep_for(std::chrono::microseconds(500));
      ASSERT_TRUE(new_save()) << "no new save began within 30 s";
      std::this_thread::sleep_for(std::chrono::milliseconds(aimed_delay_ms(rng)));
    }
    for (pid_t p : session_of(launcher.pid())) ::kill(p, SIGKILL);
    ::kill(launcher.pid(), SIGKILL);
    ASSERT_TRUE(launcher.wait(std::chrono::seconds(10)).has_value());
    const std::set<std::string> left = temporaries();
    if (std::any_of(left.begin(), left.end(),
                    [&](const std::string& t) { return before.count(t) == 0; }))
      ++mid_save;  // this kill cut a save short
    const std::string now = latest();
    ASSERT_FALSE(now.empty()) << "no latest after the kill";
    if (!previous.empty()) {
      EXPECT_GE(iter_of(now), iter_of(previous)) << now << " after " << previous;
    }
    previous = now;  // the next run must resume from it (it verifies it first)
  }
  // The last kill's latest, checked file by file and shard by shard.
  auto inspect = rh::test::run_command("env -u RH_PLUGIN_PATH " + quote(RH_RUNNER_HOST) +
                                       " ckpt inspect " + quote((work / previous).string()));
  ASSERT_EQ(inspect.exit_code, 0) << inspect.output;
  EXPECT_GE(mid_save, 3) << "too few kills landed inside a save";
  std::cerr << mid_save << " of " << kTrials << " kills landed inside a save\n";
  // The last one resumes and trains on to its end.
  std::string finish = yaml;
  finish.replace(finish.find("max_iters: 1000000"), 18,
                 "max_iters: " + std::to_string(iter_of(previous) + 2));
  Launcher last(dir.path(), "", two_ranks("kill", finish), dir / "last.log");
  const auto status = last.wait(std::chrono::seconds(60));
  ASSERT_TRUE(status.has_value()) << last.log();
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << last.log();
  EXPECT_THAT(last.log(), HasSubstr("resumed from " + (work / previous).string() + " "));
}

// A plugin library that is corrupted (garbage over its ELF header) or
// truncated (cut inside its loadable segments: mapped past the end of the
// file, the dynamic linker's first touch would be a SIGBUS): the job is
// refused with the plugin's path and the reason, exit code 2, no signal.
class CorruptPluginTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  // A copy of a shipped plugin, damaged by `damage`.
  fs::path damaged(const std::string& shipped, const std::string& name,
                   const std::function<void(std::string&)>& damage) {
    const fs::path from =
        fs::path(RH_RUNNER_HOST).parent_path().parent_path() / "lib/runner-host/plugins" / shipped;
    std::string bytes = rh::test::read_file(from);
    EXPECT_GT(bytes.size(), 65536u) << from;
    damage(bytes);
    return dir.write(name, bytes);
  }
  rh::test::CommandResult run(const std::string& strategy, const std::string& hooks) {
    dir.write("job.yaml",
              "work_dir: " + (dir / "work").string() +
                  "\nmodel: {type: mlp, in_features: 4, hidden: [8], num_classes: 2}\n"
                  "data:\n  train: {dataset: {type: synthetic_classification, num_samples: 16, "
                  "num_features: 4, num_classes: 2}, batch_size: 8, num_workers: 0}\n"
                  "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n"
                  "train_cfg: {max_epochs: 1}\nstrategy: " +
                  strategy + "\nhooks: " + hooks + "\n");
    return rh::test::run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " +
                                 quote(RH_RUNNER_HOST) + " --config job.yaml");
  }
  static void expect_refused(const rh::test::CommandResult& r, const fs::path& plugin,
                             const std::string& key, const std::string& reason) {
    EXPECT_EQ(r.signal, 0) << r.output;
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(key + ": cannot use plugin " + plugin.string() +
                                    ": cannot load the shared library: "))
        << r.output;
    EXPECT_THAT(r.output, HasSubstr(reason)) << r.output;
  }
};

TEST_F(CorruptPluginTest, GarbageOverTheElfHeaderIsRefusedNamingThePlugin) {
  const fs::path so = damaged("librh_strategy_ddp.so", "garbage.so", [](std::string& b) {
    for (size_t i = 0; i < 64; ++i) b[i] = static_cast<char>((i * 37 + 11) & 0xff);
  });
  expect_refused(run("{type: ddp, plugin: " + so.string() + "}", "[]"), so, "strategy.plugin",
                 "invalid ELF header");
  EXPECT_FALSE(fs::exists(dir / "work"));
}

TEST_F(CorruptPluginTest, ATruncatedStrategyIsRefusedNamingThePlugin) {
  const fs::path so =
      damaged("librh_strategy_ddp.so", "truncated.so", [](std::string& b) { b.resize(32768); });
  expect_refused(run("{type: ddp, plugin: " + so.string() + "}", "[]"), so, "strategy.plugin",
                 "it is truncated (32768 bytes, its loadable segment at offset ");
}

TEST_F(CorruptPluginTest, ATruncatedHookIsRefusedNamingThePlugin) {
  const fs::path so =
      damaged("librh_hook_metrics.so", "truncated.so", [](std::string& b) { b.resize(4096); });
  expect_refused(run("{type: single}", "[{type: metrics, plugin: " + so.string() + "}]"), so,
                 "hooks.0.plugin", "it is truncated (4096 bytes, ");
}

}  // namespace
