// Distributed training end to end through the runner-host binary: ddp on 2
// ranks against 1 rank with the global batch, exact resume under ddp,
// communication overlapping backward, launches from a torchrun-style
// environment, and faults (a killed worker, a failing worker, a rank with a
// different model).
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include "common/TestUtil.hpp"
#include "distributed/DistributedTestUtil.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;

namespace {

using rh::test::free_port;
using rh::test::read_safetensors;

// 800 samples: 50 iterations of a global batch of 16 per epoch.
std::string job(const std::string& strategy, int batch, const std::string& train_cfg,
                const std::string& hooks, const std::string& extra = "") {
  return "seed: 3\n"
         "model: {type: mlp, in_features: 16, hidden: [64, 64], num_classes: 4}\n"
         "data:\n"
         "  train: {dataset: {type: synthetic_classification, num_samples: 800, num_features: 16, "
         "num_classes: 4},\n"
         "          batch_size: " +
         std::to_string(batch) +
         ", shuffle: true, num_workers: 0}\n"
         "optim_wrapper: {optimizer: {type: SGD, lr: 0.05, momentum: 0.9}}\n"
         "train_cfg: " +
         train_cfg + "\nstrategy: " + strategy +
         "\nhooks:" + (hooks.empty() ? std::string(" []\n") : "\n" + hooks) +
         "dist: {timeout_s: 20}\n" + extra;
}

class DistributedTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;

  rh::test::CommandResult run(const std::string& name, const std::string& yaml,
                              const std::string& args) {
    dir.write(name + ".yaml", "work_dir: " + (dir / name).string() + "\n" + yaml);
    return rh::test::run_command("cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH " +
                                 quote(RH_RUNNER_HOST) + " --config " + name + ".yaml " + args);
  }
  std::string launch2() const {
    return "--nproc-per-node 2 --master-port " + std::to_string(free_port());
  }
};

TEST_F(DistributedTest, DdpOnTwoRanksEqualsOneRankWithTheGlobalBatch) {
  const std::string cfg = "{by_epoch: false, max_iters: 50}";
  const std::string hooks =
      "  - {type: checkpoint, by_epoch: false, interval: 50}\n  - {type: metrics}\n";
  auto single = run("single", job("{type: single}", 16, cfg, hooks), "");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  // diff_rank_seed offsets the model's random ops only: the ranks must still
  // split one shuffled order (else they share and miss samples, and the
  // runs diverge at the first step).
  auto ddp = run("ddp", job("{type: ddp}", 8, cfg, hooks, "diff_rank_seed: true\n"), launch2());
  ASSERT_EQ(ddp.exit_code, 0) << ddp.output;
  auto a = read_safetensors(dir / "single/iter_50/model.safetensors");
  auto b = read_safetensors(dir / "ddp/iter_50/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  // Tolerance 1e-5 relative to each tensor's largest magnitude: the two runs
  // sum the same per-sample gradients in a different order (two half-batch
  // means averaged vs one mean), so float32 rounding differs by ~1e-7 per
  // step; 50 SGD steps with momentum keep that well under 1e-5.
  for (const auto& [name, va] : a) {
    const auto& vb = b.at(name);
    ASSERT_EQ(va.size(), vb.size()) << name;
    float max_abs = 0, max_diff = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(va[i]));
      max_diff = std::max(max_diff, std::fabs(va[i] - vb[i]));
    }
    EXPECT_LE(max_diff, 1e-5f * max_abs)
        << name << ": max |diff| " << max_diff << " vs max |value| " << max_abs;
  }
  // And the weights did move, by far more than the tolerance: against the
  // weights after one step, every tensor differs by > 100x the tolerance.
  auto one_step = run("one_step",
                      job("{type: single}", 16, "{by_epoch: false, max_iters: 1}",
                          "  - {type: checkpoint, by_epoch: false, interval: 1}\n"),
                      "");
  ASSERT_EQ(one_step.exit_code, 0) << one_step.output;
  auto early = read_safetensors(dir / "one_step/iter_1/model.safetensors");
  ASSERT_EQ(early.size(), b.size());
  for (const auto& [name, vb] : b) {
    const auto& ve = early.at(name);
    float max_abs = 0, moved = 0;
    for (size_t i = 0; i < vb.size(); ++i) {
      max_abs = std::max(max_abs, std::fabs(vb[i]));
      moved = std::max(moved, std::fabs(vb[i] - ve[i]));
    }
    EXPECT_GT(moved, 100 * 1e-5f * max_abs) << name << " barely moved in 49 steps";
  }
}

TEST_F(DistributedTest, ExactResumeUnderDdp) {
  const std::string hooks = "  - {type: checkpoint, by_epoch: false, interval: 1}\n";
  auto straight =
      run("straight", job("{type: ddp}", 8, "{by_epoch: false, max_iters: 12}", hooks), launch2());
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  auto part =
      run("resumed", job("{type: ddp}", 8, "{by_epoch: false, max_iters: 7}", hooks), launch2());
  ASSERT_EQ(part.exit_code, 0) << part.output;
  auto rest = run(
      "resumed", job("{type: ddp}", 8, "{by_epoch: false, max_iters: 12}", hooks, "resume: auto\n"),
      launch2());
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(rh::test::read_file(dir / "straight/iter_12" / f),
              rh::test::read_file(dir / "resumed/iter_12" / f))
        << f;
}

// Exact resume where every piece of per-rank state matters: dropout draws
// from each rank's generator (different with diff_rank_seed), accumulation
// windows of 2 with a checkpoint asked for inside one (iteration 3: saved at
// the window's end), and a stop signal reaching only one rank (SIGUSR1 on the
// last rank: all ranks agree to stop at the same boundary).
class DistributedResumeTest : public DistributedTest {
 protected:
  void expect_exact(int ranks) {
    const std::string model =
        "model: {type: mlp, in_features: 16, hidden: [64, 64], num_classes: 4, dropout: 0.3}\n";
    const std::string extra =
        "diff_rank_seed: true\n"
        "optim_wrapper: {optimizer: {type: SGD, lr: 0.05, momentum: 0.9}, accumulative_counts: "
        "2}\n";
    auto with = [&](std::string yaml) {
      yaml.replace(yaml.find("model: "),
                   yaml.find('\n', yaml.find("model: ")) + 1 - yaml.find("model: "), model);
      const size_t o = yaml.find("optim_wrapper: ");
      yaml.erase(o, yaml.find('\n', o) + 1 - o);
      return yaml + extra;
    };
    const std::string cfg = "{by_epoch: false, max_iters: 8}";
    const std::string hooks = "  - {type: checkpoint, by_epoch: false, interval: 3}\n";
    const std::string launch = "--nproc-per-node " + std::to_string(ranks) + " --master-port " +
                               std::to_string(free_port());
    auto straight = run("straight", with(job("{type: ddp}", 8, cfg, hooks)), launch);
    ASSERT_EQ(straight.exit_code, 0) << straight.output;
    const std::string signal_hook =
        "  - {type: raise_signal, plugin: " +
        (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_raise_signal.so").string() +
        ", signal: 10, iter: 2, rank: " + std::to_string(ranks - 1) + "}\n";
    auto stopped = run("resumed", with(job("{type: ddp}", 8, cfg, hooks + signal_hook)),
                       "--nproc-per-node " + std::to_string(ranks) + " --master-port " +
                           std::to_string(free_port()));
    EXPECT_NE(stopped.exit_code, 0) << stopped.output;
    EXPECT_THAT(stopped.output, HasSubstr("stopped by signal"));
    EXPECT_THAT(rh::test::read_file(dir / "resumed/iter_3/meta.json"), HasSubstr("\"iter\": 4,"));
    ASSERT_FALSE(fs::exists(dir / "resumed/iter_6")) << stopped.output;
    auto rest = run("resumed", with(job("{type: ddp}", 8, cfg, hooks, "resume: auto\n")),
                    "--nproc-per-node " + std::to_string(ranks) + " --master-port " +
                        std::to_string(free_port()));
    ASSERT_EQ(rest.exit_code, 0) << rest.output;
    for (const char* f : {"model.safetensors", "optimizer.safetensors"})
      EXPECT_EQ(rh::test::read_file(dir / "straight/iter_8" / f),
                rh::test::read_file(dir / "resumed/iter_8" / f))
          << f;
  }
};

TEST_F(DistributedResumeTest, ExactWithDropoutDiffRankSeedAndAMidWindowSaveOnTwoRanks) {
  expect_exact(2);
}

TEST_F(DistributedResumeTest, ExactWithDropoutDiffRankSeedAndAMidWindowSaveOnThreeRanks) {
  expect_exact(3);
}

// Validation pads the val set to a multiple of the world size; the padded
// samples must not be counted: 299 samples give the same accuracy on 2
// ranks as on 1 for the same weights.
TEST_F(DistributedTest, ValidationMetricsCountEachSampleOnce) {
  const std::string hooks = "  - {type: checkpoint, by_epoch: false, interval: 5}\n";
  auto train = run("w", job("{type: single}", 16, "{by_epoch: false, max_iters: 5}", hooks), "");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const std::string val =
      "--mode val --set load_from=" + (dir / "w/iter_5").string() +
      " --set 'data.val={dataset: {type: synthetic_classification, num_samples: 299, "
      "num_features: 16, num_classes: 4, split: val}, batch_size: 32, num_workers: 0}' "
      "--set 'hooks=[{type: metrics}]'";
  auto metric = [&](const std::string& work, const std::string& key) {
    const std::string text = rh::test::read_file(dir / work / "metrics.jsonl");
    const auto at = text.find("\"" + key + "\": ");
    EXPECT_NE(at, std::string::npos) << text;
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + key.size() + 4));
  };
  auto one = run("one", job("{type: ddp}", 16, "{by_epoch: false, max_iters: 5}", ""), val);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  auto two = run("two", job("{type: ddp}", 16, "{by_epoch: false, max_iters: 5}", ""),
                 val + " " + launch2());
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(metric("one", "accuracy/top1"), metric("two", "accuracy/top1"));
  // The loss sums per-batch float32 sums: other batches, other rounding.
  EXPECT_NEAR(metric("one", "loss"), metric("two", "loss"), 1e-6 * metric("one", "loss"));
}

// Every rank resumes from the checkpoint rank 0 chose, or the job stops
// naming the rank: node-local storage is simulated by giving rank 1 its own
// mount namespace, where the work_dir is an empty tmpfs (it sees no
// checkpoint) or another copy (a stale view: a different meta.json).
TEST_F(DistributedTest, EveryRankMustSeeTheCheckpointRankZeroResumesFrom) {
  if (rh::test::run_command("unshare -m true").exit_code != 0)
    GTEST_SKIP() << "needs mount namespaces (unshare -m), as root";
  const std::string hooks = "  - {type: checkpoint, by_epoch: false, interval: 4}\n";
  auto two = run("w", job("{type: ddp}", 8, "{by_epoch: false, max_iters: 4}", hooks), launch2());
  ASSERT_EQ(two.exit_code, 0) << two.output;
  dir.write("resume.yaml",
            "work_dir: " + (dir / "w").string() + "\n" +
                job("{type: ddp}", 8, "{by_epoch: false, max_iters: 8}", hooks, "resume: auto\n"));
  const fs::path w = dir / "w";
  auto by_hand = [&](const std::string& rank1_mount) {
    const std::string port = std::to_string(free_port());
    const std::string env =
        "env MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ";
    const std::string exe = quote(RH_RUNNER_HOST) + " --config resume.yaml";
    const std::string rank1 =
        "unshare -m sh -c " + quote(rank1_mount + " && exec " + env + "RANK=1 LOCAL_RANK=1 " + exe);
    return rh::test::run_command("cd " + quote(dir.path().string()) + " && { (" + rank1 +
                                 " > rank1.log 2>&1; echo rank1=$? >> rank1.log) & " + env +
                                 "RANK=0 LOCAL_RANK=0 " + exe +
                                 "; echo rank0=$?; wait; cat rank1.log; }");
  };
  auto none = by_hand("mount -t tmpfs none " + quote(w.string()));
  EXPECT_THAT(none.output, HasSubstr("rank 1 cannot read the checkpoint rank 0 resumes from, " +
                                     (w / "iter_4").string()))
      << none.output;
  EXPECT_THAT(none.output, HasSubstr("rank(s) 1 cannot resume from " + (w / "iter_4").string()));
  EXPECT_THAT(none.output, ::testing::Not(HasSubstr("rank0=0")));
  EXPECT_THAT(none.output, ::testing::Not(HasSubstr("rank1=0")));
  // A stale copy: the same checkpoint name with another meta.json.
  fs::copy(w, dir / "stale", fs::copy_options::recursive);
  std::string meta = rh::test::read_file(dir / "stale/iter_4/meta.json");
  dir.write("stale/iter_4/meta.json", meta + " ");
  auto stale = by_hand("mount --bind " + quote((dir / "stale").string()) + " " + quote(w.string()));
  EXPECT_THAT(stale.output, HasSubstr("rank 1 sees a different checkpoint at " +
                                      (w / "iter_4").string() + " than rank 0"))
      << stale.output;
  EXPECT_THAT(stale.output, ::testing::Not(HasSubstr("rank0=0")));
  // Nothing of rank 0's work_dir changed.
  EXPECT_EQ(rh::test::read_file(w / "iter_4/meta.json"), meta);
}

// The host destroys the strategy before the communicator it handed it (and
// the groups made from it): collectives in a strategy's destructor work.
TEST_F(DistributedTest, AStrategyCanUseTheCommunicatorUntilItIsDestroyed) {
  const std::string strategy =
      "{type: comm_at_destroy, plugin: " +
      (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_comm_at_destroy.so").string() +
      ", path: " + (dir / "destroy.txt").string() + "}";
  auto r = run("destroy", job(strategy, 8, "{by_epoch: false, max_iters: 2}", ""), launch2());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string out = rh::test::read_file(dir / "destroy.txt");
  EXPECT_THAT(out, HasSubstr("rank 0: world barrier ok, group barrier ok"));
  EXPECT_THAT(out, HasSubstr("rank 1: world barrier ok, group barrier ok"));
}

// For 2 ranks both transports add the same two floats per element (a + b
// == b + a): the trained weights must match to the bit.
TEST_F(DistributedTest, DdpThroughSharedMemoryEqualsDdpOverTcpBitForBit) {
  const std::string cfg = "{by_epoch: false, max_iters: 20}";
  const std::string hooks = "  - {type: checkpoint, by_epoch: false, interval: 20}\n";
  auto shm = run("shm", job("{type: ddp}", 8, cfg, hooks), launch2());
  ASSERT_EQ(shm.exit_code, 0) << shm.output;
  EXPECT_THAT(shm.output, HasSubstr("gloo backend, all_reduce through shared memory"));
  auto tcp =
      run("tcp", job("{type: ddp}", 8, cfg, hooks), launch2() + " --set dist.shared_memory=false");
  ASSERT_EQ(tcp.exit_code, 0) << tcp.output;
  EXPECT_THAT(tcp.output, HasSubstr("gloo backend, all_reduce through tcp ring"));
  EXPECT_EQ(rh::test::read_file(dir / "shm/iter_20/model.safetensors"),
            rh::test::read_file(dir / "tcp/iter_20/model.safetensors"));
}

TEST_F(DistributedTest, BucketsAreAllReducedDuringBackward) {
  // Small buckets: several per backward; the first ones must be issued
  // before backward returns (the strategy counts them as it issues them).
  auto r = run("overlap",
               job("{type: ddp, first_bucket_mb: 0.001, bucket_cap_mb: 0.01}", 8,
                   "{by_epoch: false, max_iters: 3}", "  - {type: metrics}\n"),
               launch2());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(rh::test::read_file(dir / "overlap/metrics.jsonl"));
  int train_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    auto at = line.find("\"ddp/buckets_launched_in_backward\": ");
    if (at == std::string::npos) continue;
    ++train_lines;
    EXPECT_GE(std::stod(line.substr(at + 36)), 1.0) << line;
  }
  EXPECT_EQ(train_lines, 3);
}

TEST_F(DistributedTest, TorchrunStyleEnvironmentAndADifferentModelOnOneRank) {
  const std::string yaml = job("{type: ddp}", 8, "{by_epoch: false, max_iters: 2}", "");
  dir.write("env.yaml", "work_dir: " + (dir / "env").string() + "\n" + yaml);
  auto launch_by_hand = [&](const std::string& rank1_args) {
    const std::string port = std::to_string(free_port());
    const std::string common =
        "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ";
    const std::string exe = quote(RH_RUNNER_HOST) + " --config env.yaml";
    return rh::test::run_command(
        "cd " + quote(dir.path().string()) + " && { (env " + common + "RANK=1 LOCAL_RANK=1 " + exe +
        " " + rank1_args + " > rank1.log 2>&1; echo rank1=$? >> rank1.log) & env " + common +
        "RANK=0 LOCAL_RANK=0 " + exe + "; echo rank0=$?; wait; cat rank1.log; }");
  };
  auto ok = launch_by_hand("");
  EXPECT_THAT(ok.output, HasSubstr("rank0=0")) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("rank1=0")) << ok.output;
  auto bad = launch_by_hand("--set 'model.hidden=[64, 32]'");
  EXPECT_THAT(
      bad.output,
      HasSubstr("rank 1 built a different model than rank 0; first difference: rank 0 has "
                "'layers.1.weight Float [64, 64]', rank 1 has 'layers.1.weight Float [32, 64]'"))
      << bad.output;
  EXPECT_THAT(bad.output, ::testing::Not(HasSubstr("rank0=0")));
  EXPECT_THAT(bad.output, ::testing::Not(HasSubstr("rank1=0")));
}

// Runs the launcher in the background; returns its pid.
pid_t spawn_launcher(const fs::path& dir, const std::string& args, const fs::path& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    std::string cmd = "cd " + quote(dir.string()) + " && exec " + quote(RH_RUNNER_HOST) + " " +
                      args + " > " + quote(log.string()) + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = rh::test::read_file(e.path() / "stat");
    auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state;
    pid_t ppid;
    rest >> state >> ppid;
    if (ppid == pid) out.push_back(std::stoi(name));
  }
  return out;
}

bool alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

TEST_F(DistributedTest, AKilledWorkerStopsTheLauncherAndLeavesNoProcess) {
  dir.write("long.yaml", "work_dir: " + (dir / "long").string() + "\n" +
                             job("{type: ddp}", 8, "{by_epoch: false, max_iters: 1000000}",
                                 "  - {type: metrics}\n"));
  pid_t launcher = spawn_launcher(dir.path(), "--config long.yaml " + launch2(), dir / "long.log");
  // Wait until training runs.
  for (int i = 0; i < 300 && !fs::exists(dir / "long/metrics.jsonl"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(fs::exists(dir / "long/metrics.jsonl")) << rh::test::read_file(dir / "long.log");
  std::vector<pid_t> workers = children_of(launcher);
  ASSERT_EQ(workers.size(), 2u);
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(workers[1], SIGKILL);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0)
      << rh::test::read_file(dir / "long.log");
  EXPECT_LE(seconds, 20 + 10);  // dist.timeout_s + 10
  for (pid_t w : workers) EXPECT_FALSE(alive(w)) << "worker " << w << " survived";
  EXPECT_THAT(rh::test::read_file(dir / "long.log"), HasSubstr("killed by signal 9"));
}

TEST_F(DistributedTest, AFailingWorkerStopsTheOthersWithItsExitCode) {
  const std::string fail_hook =
      "  - {type: fail_on_rank, plugin: " +
      (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_fail_on_rank.so").string() +
      ", rank: 1, iter: 3}\n";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run("fail", job("{type: ddp}", 8, "{by_epoch: false, max_iters: 1000000}", fail_hook),
               launch2());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[rank 1]"));
  EXPECT_THAT(r.output, HasSubstr("failing on purpose at rank 1, iteration 3"));
  EXPECT_LE(seconds, 20 + 10);
}

}  // namespace

namespace {

// ddp needs a communicator even alone: a single process without any launcher
// environment gets a world of one (like PyTorch DDP with world_size 1).
TEST(DistributedSingleProcessTest, DdpRunsInOneProcessWithoutALauncher) {
  rh::test::TempDir dir;
  dir.write("one.yaml", "work_dir: " + (dir / "one").string() + "\n" +
                            job("{type: ddp}", 8, "{by_epoch: false, max_iters: 3}", ""));
  auto r = rh::test::run_command(
      "cd " + quote(dir.path().string()) +
      " && env -u RANK -u WORLD_SIZE -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK " +
      quote(RH_RUNNER_HOST) + " --config one.yaml");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("strategy ddp on cpu, seed 3, rank 0 of 1"));
}

}  // namespace
