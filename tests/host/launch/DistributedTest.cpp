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
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/DistributedTestUtil.hpp"
#include "common/TestUtil.hpp"

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
  std::string launch2() const { return "--nproc-per-node 2"; }
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
  // Tolerance 1e-5 relative to each tensor's largest magnitude, an
  // effect-size bound. The two runs sum the same 16 per-sample gradients in
  // another order (two half-batch means averaged vs one mean; each within
  // γ16 = 16u·Ḡ of the exact sum, u = 2^-24, Ḡ the per-sample gradients'
  // mean size), momentum carries a step's difference up to 1/(1 - 0.9) =
  // 10 times, and once the weights differ each float32 update rounds
  // differently (≤ 2u·|θ| a step). To first order over 50 steps: 100u =
  // 6e-6 of the largest value for the updates (sqrt(50)·u = 4.2e-7 as a
  // random walk) plus 0.05·50·10·32u·Ḡ = 4.8e-5·Ḡ for the sums, Ḡ not known
  // here: no worst case fits. Measured 2.7e-7 (head); a wrong split of the
  // samples or a missing average moves the weights by about what they
  // moved since step 1, which is > 100x the tolerance (checked below).
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
    const std::string launch = "--nproc-per-node " + std::to_string(ranks);
    auto straight = run("straight", with(job("{type: ddp}", 8, cfg, hooks)), launch);
    ASSERT_EQ(straight.exit_code, 0) << straight.output;
    const std::string signal_hook =
        "  - {type: raise_signal, plugin: " +
        (fs::path(RH_TEST_PLUGIN_DIR) / "librh_test_raise_signal.so").string() +
        ", signal: 10, iter: 2, rank: " + std::to_string(ranks - 1) + "}\n";
    auto stopped = run("resumed", with(job("{type: ddp}", 8, cfg, hooks + signal_hook)),
                       "--nproc-per-node " + std::to_string(ranks));
    EXPECT_NE(stopped.exit_code, 0) << stopped.output;
    EXPECT_THAT(stopped.output, HasSubstr("stopped by signal"));
    EXPECT_THAT(rh::test::read_file(dir / "resumed/iter_3/meta.json"), HasSubstr("\"iter\": 4,"));
    ASSERT_FALSE(fs::exists(dir / "resumed/iter_6")) << stopped.output;
    auto rest = run("resumed", with(job("{type: ddp}", 8, cfg, hooks, "resume: auto\n")),
                    "--nproc-per-node " + std::to_string(ranks));
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
  // The loss adds per-batch float32 sums of <= 32 positive per-sample losses
  // (in double): other batches, other rounding. Each batch's sum is within
  // γ31 = 31u of its exact value (u = 2^-24), so each run's mean is within
  // 31u of the exact mean relative, and the two within 62u = 3.7e-6 (the
  // per-sample losses taken as equal whatever rows share a matmul). 4e-6;
  // counting a padded sample twice moves the mean by ~1/299 = 3e-3.
  EXPECT_NEAR(metric("one", "loss"), metric("two", "loss"), 4e-6 * metric("one", "loss"));
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

// ---- Issue 31, items 8 and 3: jobs side by side on one machine, and the
// job's own dist.master_addr / dist.master_port.

// A tiny ddp job (2 iterations of 8 samples per rank); `dist` is added to
// its dist map.
std::string tiny_job(const std::string& dist = "") {
  return "seed: 1\n"
         "model: {type: mlp, in_features: 4, hidden: [8], num_classes: 2}\n"
         "data:\n"
         "  train: {dataset: {type: synthetic_classification, num_samples: 32, num_features: 4, "
         "num_classes: 2}, batch_size: 8, num_workers: 0}\n"
         "optim_wrapper: {optimizer: {type: SGD, lr: 0.1}}\n"
         "train_cfg: {by_epoch: false, max_iters: 2}\n"
         "strategy: {type: ddp}\n"
         "hooks: []\n"
         "dist: {timeout_s: 60" +
         dist + "}\n";
}

// What the tests below take away from the test's own environment: no port,
// no address, no job id, no launcher or torchrun variables.
const std::string kCleanEnv =
    "env -u RH_PLUGIN_PATH -u MASTER_ADDR -u MASTER_PORT -u RH_JOB_ID -u RH_LAUNCHED -u RANK "
    "-u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u GROUP_RANK -u TORCHELASTIC_RUN_ID "
    "-u TORCHELASTIC_USE_AGENT_STORE ";

// Runs `command` in `dir` in the background, its output to `log`; returns its pid.
pid_t spawn_shell(const fs::path& dir, const std::string& command, const fs::path& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    std::string cmd =
        "cd " + quote(dir.string()) + " && exec " + command + " > " + quote(log.string()) + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// The exit code of our child `pid` (-1 when killed by a signal).
int exit_code_of(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether something listens on 127.0.0.1:port within `seconds`.
bool listening_within(int port, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// 4 two-rank jobs started at once on this machine, no port given anywhere,
// 5 rounds: every job succeeds, each at its own port. (With the old fixed
// default port 29500, 22 of 24 such jobs failed: a bind error on rank 0, or
// rank 1 joining the other job's store; 20 jobs leave such a fault no
// chance, and 10 rounds cost 37 s of the suite's 2 cores.)
TEST_F(DistributedTest, ConcurrentJobsOnOneMachineNeverCollide) {
  constexpr int kJobs = 4;
  constexpr int kRounds = 5;
  for (int j = 0; j < kJobs; ++j)
    dir.write("c" + std::to_string(j) + ".yaml",
              "work_dir: " + (dir / ("c" + std::to_string(j))).string() + "\n" + tiny_job());
  int failures = 0;
  std::string failed_logs;
  const std::regex at_re("\\[rank 0\\] .*rendezvous at 127\\.0\\.0\\.1:([0-9]+) \\(");
  for (int round = 0; round < kRounds; ++round) {
    std::vector<pid_t> pids;
    for (int j = 0; j < kJobs; ++j)
      pids.push_back(spawn_shell(dir.path(),
                                 kCleanEnv + quote(RH_RUNNER_HOST) + " --config c" +
                                     std::to_string(j) + ".yaml --nproc-per-node 2",
                                 dir / ("c" + std::to_string(j) + ".log")));
    std::set<std::string> ports;
    for (int j = 0; j < kJobs; ++j) {
      const int code = exit_code_of(pids[static_cast<size_t>(j)]);
      const std::string log = rh::test::read_file(dir / ("c" + std::to_string(j) + ".log"));
      std::smatch m;
      if (std::regex_search(log, m, at_re)) ports.insert(m[1].str());
      if (code != 0) {
        ++failures;
        failed_logs += "round " + std::to_string(round) + ", job " + std::to_string(j) +
                       " exited with " + std::to_string(code) + ":\n" + log + "\n";
      } else {
        EXPECT_THAT(log, HasSubstr("port from the launcher, which picked a free port)")) << log;
      }
    }
    EXPECT_EQ(ports.size(), static_cast<size_t>(kJobs))
        << "round " << round << ": jobs shared a port";
  }
  EXPECT_EQ(failures, 0) << failures << " of " << kJobs * kRounds << " jobs failed\n"
                         << failed_logs;
}

// A rank that reaches the store of another job (two jobs given one port)
// stops with a message naming both jobs instead of joining; the other job
// goes on undisturbed.
TEST_F(DistributedTest, ARankThatReachesAnotherJobsStoreStopsNamingBothJobs) {
  dir.write("a.yaml", "work_dir: " + (dir / "a").string() + "\n" + tiny_job());
  dir.write("b.yaml", "work_dir: " + (dir / "b").string() + "\n" + tiny_job());
  const int port = free_port();
  const std::string common = kCleanEnv +
                             "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
                             " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ";
  const std::string exe = quote(RH_RUNNER_HOST);
  const pid_t a0 = spawn_shell(
      dir.path(),
      common + "RANK=0 LOCAL_RANK=0 RH_JOB_ID=aaaaaaaaaaaaaaaa " + exe + " --config a.yaml",
      dir / "a0.log");
  ASSERT_TRUE(listening_within(port, 60)) << rh::test::read_file(dir / "a0.log");
  auto b1 = rh::test::run_command("cd " + quote(dir.path().string()) + " && " + common +
                                  "RANK=1 LOCAL_RANK=1 RH_JOB_ID=bbbbbbbbbbbbbbbb " + exe +
                                  " --config b.yaml");
  EXPECT_NE(b1.exit_code, 0) << b1.output;
  EXPECT_THAT(b1.output, HasSubstr("rank 1 of 2 of job bbbbbbbbbbbbbbbb (RH_JOB_ID; config "))
      << b1.output;
  EXPECT_THAT(b1.output, HasSubstr("b.yaml) reached the rendezvous store at 127.0.0.1:" +
                                   std::to_string(port) +
                                   " of another job: job aaaaaaaaaaaaaaaa (RH_JOB_ID; config "));
  EXPECT_THAT(b1.output, HasSubstr("a.yaml) (its rank 0 is pid "));
  EXPECT_THAT(b1.output, HasSubstr("It stops instead of joining that job. The two jobs were "
                                   "given the same port (this one's from MASTER_PORT)"));
  EXPECT_THAT(b1.output, HasSubstr("--master-port PORT"));
  // Job a was not disturbed: its own rank 1 joins, and both train to the end.
  auto a1 = rh::test::run_command("cd " + quote(dir.path().string()) + " && " + common +
                                  "RANK=1 LOCAL_RANK=1 RH_JOB_ID=aaaaaaaaaaaaaaaa " + exe +
                                  " --config a.yaml");
  EXPECT_EQ(a1.exit_code, 0) << a1.output;
  EXPECT_EQ(exit_code_of(a0), 0) << rh::test::read_file(dir / "a0.log");
  // Ids derived from what torchrun's ranks share: another run id is another job.
  const int port2 = free_port();
  const std::string torchrun = kCleanEnv +
                               "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port2) +
                               " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 TORCHELASTIC_RESTART_COUNT=0 ";
  const pid_t c0 = spawn_shell(
      dir.path(),
      torchrun + "RANK=0 LOCAL_RANK=0 TORCHELASTIC_RUN_ID=run-c " + exe + " --config a.yaml",
      dir / "c0.log");
  ASSERT_TRUE(listening_within(port2, 60)) << rh::test::read_file(dir / "c0.log");
  auto d1 = rh::test::run_command("cd " + quote(dir.path().string()) + " && " + torchrun +
                                  "RANK=1 LOCAL_RANK=1 TORCHELASTIC_RUN_ID=run-d " + exe +
                                  " --config b.yaml");
  EXPECT_NE(d1.exit_code, 0) << d1.output;
  EXPECT_THAT(d1.output, HasSubstr("(torchrun run run-d, restart 0, rendezvous at 127.0.0.1:" +
                                   std::to_string(port2) + ", 2 ranks; config "))
      << d1.output;
  EXPECT_THAT(d1.output, HasSubstr("of another job: job "));
  EXPECT_THAT(d1.output, HasSubstr("(torchrun run run-c, restart 0, rendezvous at"));
  // c's own rank 1 never comes: stop it.
  ::kill(-c0, SIGKILL);
  exit_code_of(c0);
  // Ranks started by hand with nothing but one MASTER_ADDR:MASTER_PORT to
  // share: two such jobs get one id. A rank's place is claimed once: the
  // second process to claim it stops instead of mixing into the other job.
  dir.write("long.yaml",
            "work_dir: " + (dir / "long").string() + "\n" +
                std::regex_replace(tiny_job(), std::regex("max_iters: 2"), "max_iters: 1000000"));
  const int port3 = free_port();
  const std::string hand = kCleanEnv +
                           "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port3) +
                           " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ";
  const pid_t e0 = spawn_shell(
      dir.path(), hand + "RANK=0 LOCAL_RANK=0 " + exe + " --config long.yaml", dir / "e0.log");
  ASSERT_TRUE(listening_within(port3, 60)) << rh::test::read_file(dir / "e0.log");
  const pid_t e1 = spawn_shell(
      dir.path(), hand + "RANK=1 LOCAL_RANK=1 " + exe + " --config long.yaml", dir / "e1.log");
  // e1 took rank 1's place once training runs.
  for (int i = 0; i < 600 && !fs::exists(dir / "long/metrics.jsonl") &&
                  rh::test::read_file(dir / "e0.log").find("rendezvous at") == std::string::npos;
       ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto f1 = rh::test::run_command("cd " + quote(dir.path().string()) + " && " + hand +
                                  "RANK=1 LOCAL_RANK=1 " + exe + " --config b.yaml");
  ::kill(-e0, SIGKILL);
  ::kill(-e1, SIGKILL);
  exit_code_of(e0);
  exit_code_of(e1);
  EXPECT_NE(f1.exit_code, 0) << f1.output;
  EXPECT_THAT(f1.output, HasSubstr("rank 1 of 2 of job "));
  EXPECT_THAT(f1.output, HasSubstr("found its place in the rendezvous store at 127.0.0.1:" +
                                   std::to_string(port3) +
                                   " taken: another process joined as rank 1 of 2 already"))
      << f1.output;
}

// torchrun's default (static) rendezvous: its agent hosts the store at
// MASTER_ADDR:MASTER_PORT and tells the workers so
// (TORCHELASTIC_USE_AGENT_STORE=True); rank 0 must join it as a client, not
// try to host a store on the agent's port. Debian's torchrun 1.13 cannot
// start workers under Python 3.11, so a stand-in does what its agent does:
// a multi-tenant TCPStore at the port, and 2 ranks with torchrun's variables.
TEST_F(DistributedTest, UnderTorchrunsAgentStoreEveryRankJoinsItAsAClient) {
  if (rh::test::run_command("/usr/bin/python3 -c 'import torch'").exit_code != 0)
    GTEST_SKIP() << "needs /usr/bin/python3 with torch (python3-torch) for torchrun's store";
  dir.write("t.yaml", "work_dir: " + (dir / "t").string() + "\n" + tiny_job());
  dir.write(
      "agent.py",
      "import datetime, os, subprocess, sys\n"
      "from torch.distributed import TCPStore\n"
      "port = int(sys.argv[1])\n"
      "def store(**kw):\n"
      "    return TCPStore('127.0.0.1', port, 1, True, datetime.timedelta(seconds=60),\n"
      "                    multi_tenant=True, **kw)\n"
      // torch 2.4+ asks for libuv by default; a torch built without it
      // (Debian 13's 2.6) refuses that, and 1.13 has no such argument.
      "try:\n"
      "    agent_store = store()\n"
      "except RuntimeError as e:\n"
      "    if 'libuv' not in str(e): raise\n"
      "    agent_store = store(use_libuv=False)\n"
      "env = dict(os.environ, MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port),\n"
      "           WORLD_SIZE='2', LOCAL_WORLD_SIZE='2', TORCHELASTIC_RUN_ID='none',\n"
      "           TORCHELASTIC_RESTART_COUNT='0', TORCHELASTIC_USE_AGENT_STORE='True')\n"
      "ranks = [subprocess.Popen(sys.argv[2:], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))\n"
      "         for r in range(2)]\n"
      "print('exit codes', [p.wait() for p in ranks], flush=True)\n");
  auto r = rh::test::run_command("cd " + quote(dir.path().string()) + " && " + kCleanEnv +
                                 "/usr/bin/python3 agent.py " + std::to_string(free_port()) + " " +
                                 quote(RH_RUNNER_HOST) + " --config t.yaml");
  EXPECT_THAT(r.output, HasSubstr("exit codes [0, 0]")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("port from MASTER_PORT; the store is torchrun's agent's)"))
      << r.output;
}

// A port that something listens on already stops rank 0 with a message
// saying so, where the port came from, and naming --master-port.
TEST_F(DistributedTest, ATakenPortStopsRankZeroNamingMasterPort) {
  dir.write("t.yaml", "work_dir: " + (dir / "t").string() + "\n" + tiny_job());
  const int other = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(other, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(other, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(other, reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  auto r =
      rh::test::run_command("cd " + quote(dir.path().string()) + " && " + kCleanEnv +
                            "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port + " WORLD_SIZE=2 RANK=0 " +
                            quote(RH_RUNNER_HOST) + " --config t.yaml");
  ::close(other);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("rendezvous at 127.0.0.1:" + port + " failed on rank 0: port " + port +
                        " is taken (the port came from MASTER_PORT): another job's "
                        "rendezvous store, or another program, listens on it"))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("Give this job a port of its own with --master-port PORT"));
}

// The job's dist.master_addr and dist.master_port are where the ranks meet
// when the environment gives no MASTER_ADDR/MASTER_PORT (a hand-made env://,
// the built-in launcher with no flag); MASTER_PORT wins over them. The log
// says which was used.
TEST_F(DistributedTest, TheJobsMasterAddrAndPortAreUsedAndTheLogSaysWhich) {
  const int port = free_port();
  const std::string dist = ", master_addr: 127.0.0.1, master_port: " + std::to_string(port);
  dir.write("k.yaml", "work_dir: " + (dir / "k").string() + "\n" + tiny_job(dist));
  const std::string file = (dir / "k.yaml").string();
  const std::string exe = quote(RH_RUNNER_HOST) + " --config " + quote(file);
  auto by_hand = [&](const std::string& extra_env) {
    const std::string common = kCleanEnv + extra_env + " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ";
    return rh::test::run_command(
        "cd " + quote(dir.path().string()) + " && { (" + common + "RANK=1 LOCAL_RANK=1 " + exe +
        " > rank1.log 2>&1; echo rank1=$? >> rank1.log) & " + common + "RANK=0 LOCAL_RANK=0 " +
        exe + "; echo rank0=$?; wait; cat rank1.log; }");
  };
  // The dist line is the job file's 10th (work_dir, then tiny_job's lines).
  const std::string dist_line = "dist: {timeout_s: 60" + dist + "}";
  const std::string addr_at = file + ":10:" + std::to_string(dist_line.find("127.0.0.1") + 1);
  const std::string port_at =
      file + ":10:" +
      std::to_string(dist_line.find(std::to_string(port), dist_line.find("master_port")) + 1);
  const std::string from_job = "rendezvous at 127.0.0.1:" + std::to_string(port) +
                               " (address from dist.master_addr at " + addr_at +
                               ", port from dist.master_port at " + port_at + ")";
  auto r = by_hand("");
  EXPECT_THAT(r.output, HasSubstr("rank0=0")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank1=0")) << r.output;
  EXPECT_THAT(r.output, HasSubstr(from_job)) << r.output;
  // The built-in launcher reads them too.
  auto launched = rh::test::run_command("cd " + quote(dir.path().string()) + " && " + kCleanEnv +
                                        exe + " --nproc-per-node 2");
  EXPECT_EQ(launched.exit_code, 0) << launched.output;
  EXPECT_THAT(launched.output, HasSubstr("[rank 0] ")) << launched.output;
  EXPECT_THAT(launched.output, HasSubstr(from_job)) << launched.output;
  // MASTER_PORT over dist.master_port.
  const int other = free_port();
  r = by_hand("MASTER_PORT=" + std::to_string(other));
  EXPECT_THAT(r.output, HasSubstr("rank0=0")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rendezvous at 127.0.0.1:" + std::to_string(other) +
                                  " (address from dist.master_addr at " + addr_at +
                                  ", port from MASTER_PORT)"))
      << r.output;
}

}  // namespace
