// The BLAS checks through the runner-host binary, as a user runs it:
// env_cfg.blas_coretype: auto chooses OpenBLAS's kernels before the runner
// library loads them and the launcher's workers run them; the start-up check
// warns of older kernels once per node, with the measured factor; an
// OPENBLAS_CORETYPE the environment sets stands, unprobed.
//
// What the runs must say depends on the machine: the test asks OpenBLAS
// (the program's --blas-probe, a child) which core it picks and ranks it
// against this CPU, then asserts that path: "chosen" where OpenBLAS runs an
// older kernel than the CPU could (Debian 12's 0.3.21 runs Prescott on this
// AVX-512 Xeon), "already the best" where it does not. Never skipped.
// Each run keeps its probe results in a cache folder of its own
// (XDG_CACHE_HOME), so that the probes run here; the environment's
// OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine has them,
// but in the one test that sets OPENBLAS_CORETYPE to show it is left alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "common/TestUtil.hpp"
#include "torch_services/BlasKernel.hpp"
#include "torch_services/BlasProbeChild.hpp"

namespace fs = std::filesystem;
using rh::test::quote;
using ::testing::HasSubstr;
using ::testing::Not;

namespace {

// What this machine's OpenBLAS and CPU are, as the checks see them.
struct Machine {
  rh::host::BlasProbeResult blas;  // the core OpenBLAS picks by itself
  std::string better;              // the core the checks try first; "" when none is better
  std::string tier;                // the CPU's, as the messages name it
  bool env_sets_openblas = false;  // OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE set here
};

Machine this_machine() {
  Machine m;
  m.blas = rh::host::probe_in_child(RH_RUNNER_HOST, {"libblas.so.3", std::nullopt, true});
  const rh::host::CpuFeatures cpu = rh::host::detect_cpu_features();
  const auto better = rh::host::better_cores(rh::host::core_tier(m.blas.core), cpu);
  if (!better.empty()) m.better = better.front();
  m.tier = rh::host::tier_name(rh::host::cpu_tier(cpu));
  m.env_sets_openblas =
      std::getenv("OPENBLAS_CORETYPE") != nullptr || std::getenv("OPENBLAS_L2_SIZE") != nullptr;
  return m;
}

size_t count(const std::string& text, const std::string& piece) {
  size_t n = 0;
  for (size_t at = text.find(piece); at != std::string::npos; at = text.find(piece, at + 1)) ++n;
  return n;
}

size_t files_in(const fs::path& dir) {
  if (!fs::exists(dir)) return 0;
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

class BlasCoretypeTest : public ::testing::Test {
 protected:
  rh::test::TempDir dir;
  const Machine machine = this_machine();

  void SetUp() override { ASSERT_EQ(machine.blas.error, "") << "cannot ask this machine's BLAS"; }
  fs::path cache() const { return dir / "cache/runner-host/blas-probe"; }
  // The quickstart, shortened to a few iterations, in a work_dir of the
  // test's; `env` prefixes the command.
  rh::test::CommandResult run(const std::string& args, const std::string& env = "") {
    return rh::test::run_command(
        "cd " + quote(dir.path().string()) + " && env -u RH_PLUGIN_PATH XDG_CACHE_HOME=" +
        quote((dir / "cache").string()) + " " + env + " " + quote(RH_RUNNER_HOST) + " --config " +
        quote(RH_QUICKSTART) + " --set work_dir=work --set train_cfg.max_epochs=1" +
        " --set data.train.dataset.num_samples=256 --set data.val.dataset.num_samples=256 " + args);
  }
};

// auto on two ranks: the launcher chooses before it starts the workers, and
// both run the chosen kernels (each says which at debug level).
TEST_F(BlasCoretypeTest, AutoChoosesTheBetterKernelForTheWorkersOrSaysItIsTheBest) {
  const auto r =
      run("--set env_cfg.blas_coretype=auto --set strategy.type=ddp --nproc-per-node 2 "
          "--master-port 0 --log-level debug");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string said = "[info] env_cfg.blas_coretype auto: ";
  if (machine.env_sets_openblas) {
    // The environment's choice stands: OPENBLAS_CORETYPE, or
    // OPENBLAS_L2_SIZE (auto leaves a machine tuned by hand alone).
    EXPECT_THAT(r.output, ::testing::AnyOf(HasSubstr("is set in the environment and stands"),
                                           HasSubstr("auto leaves it alone")));
    return;
  }
  if (machine.blas.core.empty()) {
    EXPECT_THAT(r.output, HasSubstr("is not OpenBLAS, which has no kernels to choose"));
    return;
  }
  if (machine.better.empty()) {
    // OpenBLAS already picks its best kernels for this CPU (Debian 13's 0.3.29 here).
    EXPECT_THAT(r.output, HasSubstr(said + "OpenBLAS"));
    EXPECT_THAT(r.output, HasSubstr("already runs its " + machine.blas.core +
                                    " kernels, the best for this CPU (" + machine.tier +
                                    "): OPENBLAS_CORETYPE left unset"));
    EXPECT_EQ(count(r.output, "running its " + machine.blas.core + " kernels"), 2u) << r.output;
    EXPECT_EQ(files_in(cache()), 0u) << "nothing to measure, nothing probed";
    return;
  }
  // An older kernel than the CPU could run (Prescott on this Xeon): the
  // better one, its products checked against float64, and faster.
  EXPECT_EQ(count(r.output, said), 1u) << "the launcher says it, its workers do not\n" << r.output;
  const std::regex chosen("\\[info\\] env_cfg\\.blas_coretype auto: OPENBLAS_CORETYPE=" +
                          machine.better + ": OpenBLAS [0-9.]+ runs its " + machine.blas.core +
                          " kernels on this CPU \\(" + machine.tier +
                          "\\), where a float32 matrix product takes [0-9.]+x as long as with "
                          "its " +
                          machine.better +
                          " kernels \\(measured on this machine, one thread; results checked "
                          "against float64\\)");
  ASSERT_TRUE(std::regex_search(r.output, chosen)) << r.output;
  EXPECT_GT(files_in(cache()), 0u) << "the timed probes are kept";
  // Both workers run it: rank 0 (the node's first) and rank 1 each say so.
  for (const char* rank : {"[rank 0]", "[rank 1]"}) {
    const std::regex ran(std::regex_replace(rank, std::regex("[\\[\\]]"), "\\$&") +
                         ".*\\[debug\\] BLAS: .*running its " + machine.better + " kernels");
    EXPECT_TRUE(std::regex_search(r.output, ran)) << rank << "\n" << r.output;
  }
  EXPECT_THAT(r.output, Not(HasSubstr("running its " + machine.blas.core + " kernels")));
  // The start-up check sees the environment's choice and leaves it.
  EXPECT_THAT(r.output, HasSubstr("the environment's choice stands (OPENBLAS_CORETYPE=" +
                                  machine.better + "; nothing probed)"));
  EXPECT_THAT(r.output, Not(HasSubstr("[warning] LibTorch's BLAS")));
}

// Without env_cfg: the node's first rank warns of an older kernel, with the
// factor and the fix; the probes run once and are kept, and a second run
// (two ranks) reads them and warns once.
TEST_F(BlasCoretypeTest, TheStartUpCheckWarnsOfAnOlderKernelOncePerNodeWithTheFactor) {
  const auto first = run("--dry-run --log-level debug");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  if (machine.env_sets_openblas || machine.blas.core.empty()) {
    EXPECT_THAT(first.output, Not(HasSubstr("Set OPENBLAS_CORETYPE")));
    EXPECT_EQ(files_in(cache()), 0u);
    return;
  }
  if (machine.better.empty()) {
    EXPECT_THAT(first.output, HasSubstr("running its " + machine.blas.core +
                                        " kernels, the best for this CPU (" + machine.tier + ")"));
    EXPECT_EQ(files_in(cache()), 0u);
    return;
  }
  const std::regex warning(
      "\\[warning\\] LibTorch's BLAS \\(OpenBLAS [0-9.]+, /[^)]+\\) runs its " + machine.blas.core +
      " kernels on this CPU \\(" + machine.tier +
      "\\): a float32 matrix product takes [0-9.]+x as long as with its " + machine.better +
      " kernels \\(measured on this machine, one thread; results checked against float64\\)\\. "
      "Set OPENBLAS_CORETYPE=" +
      machine.better + ", or env_cfg\\.blas_coretype: auto in the job");
  ASSERT_TRUE(std::regex_search(first.output, warning)) << first.output;
  const size_t kept = files_in(cache());
  EXPECT_EQ(kept, 2u) << "the environment's probe and the better core's";

  const auto second = run("--dry-run --nproc-per-node 2 --master-port 0");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(count(second.output, "[warning] LibTorch's BLAS"), 1u) << second.output;
  EXPECT_TRUE(std::regex_search(second.output, warning)) << second.output;
  EXPECT_EQ(files_in(cache()), kept) << "the second run read what the first kept";
}

// OPENBLAS_CORETYPE set in the environment (here to the core OpenBLAS picks
// anyway, so nothing else changes): env_cfg.blas_coretype leaves it, the
// start-up check neither probes nor warns.
TEST_F(BlasCoretypeTest, TheEnvironmentsCoretypeStandsUnprobed) {
  const std::string core = machine.blas.core.empty() ? "Prescott" : machine.blas.core;
  const auto r = run("--set env_cfg.blas_coretype=auto --dry-run --log-level debug",
                     "OPENBLAS_CORETYPE=" + core);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[info] env_cfg.blas_coretype auto: OPENBLAS_CORETYPE=" + core +
                                  " is set in the environment and stands (it is never "
                                  "overridden); nothing probed"));
  if (!machine.blas.core.empty()) {
    EXPECT_THAT(r.output, HasSubstr("running its " + core +
                                    " kernels; the environment's choice stands "
                                    "(OPENBLAS_CORETYPE=" +
                                    core + "; nothing probed)"));
  }
  EXPECT_THAT(r.output, Not(HasSubstr("Set OPENBLAS_CORETYPE")));
  EXPECT_EQ(files_in(cache()), 0u) << "nothing was probed";
}

}  // namespace
