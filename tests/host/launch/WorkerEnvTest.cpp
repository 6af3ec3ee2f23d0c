// What a worker reads from its environment (host/launch/WorkerEnv) and how the
// launcher flags are taken off the workers' command line (LaunchMain).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>

#include <map>

#include "launch/LaunchMain.hpp"
#include "launch/Launcher.hpp"
#include "launch/WorkerEnv.hpp"

using rh::launch::DistEnv;
using rh::launch::read_dist_env;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

using Env = std::map<std::string, std::string>;

DistEnv read(const Env& env) {
  return read_dist_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const Env& env) {
  try {
    read(env);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DistEnv, NothingSetIsOneProcess) {
  DistEnv e = read({});
  EXPECT_EQ(e.source, "none");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.local_world_size, 1);
  // A SLURM batch script's own shell (no srun step) is one process too.
  EXPECT_EQ(read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}).source, "none");
}

TEST(DistEnv, LauncherAndTorchrun) {
  Env env = {{"RANK", "3"},          {"WORLD_SIZE", "4"},
             {"LOCAL_RANK", "1"},    {"LOCAL_WORLD_SIZE", "2"},
             {"GROUP_RANK", "1"},    {"MASTER_ADDR", "node0"},
             {"MASTER_PORT", "1234"}};
  DistEnv e = read(env);
  EXPECT_EQ(e.source, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_port, 1234);
  env["RH_LAUNCHED"] = "1";
  EXPECT_EQ(read(env).source, "launcher");
  // Before SLURM and Open MPI variables (torchrun inside srun).
  env["SLURM_PROCID"] = "0";
  env["SLURM_STEP_NUM_TASKS"] = "1";
  env["OMPI_COMM_WORLD_RANK"] = "0";
  env["OMPI_COMM_WORLD_SIZE"] = "1";
  EXPECT_EQ(read(env).rank, 3);
  // A hand-made env:// with RANK and WORLD_SIZE only: one node.
  e = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistEnv, OpenMpi) {
  Env env = {{"OMPI_COMM_WORLD_RANK", "5"},
             {"OMPI_COMM_WORLD_SIZE", "8"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
             {"MASTER_ADDR", "host0"},
             // mpirun inside an allocation inherits SLURM's variables: ignored
             {"SLURM_PROCID", "1"},
             {"SLURM_STEP_NUM_TASKS", "2"}};
  DistEnv e = read(env);
  EXPECT_EQ(e.source, "openmpi");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world_size, 4);
  EXPECT_EQ(e.node_rank, 1);
  EXPECT_EQ(e.master_addr, "host0");
  EXPECT_EQ(e.master_port, 29500);
  env.erase("MASTER_ADDR");
  EXPECT_THAT(error_of(env), HasSubstr("MASTER_ADDR is not set"));
  // One node: the master is this host.
  e = read({{"OMPI_COMM_WORLD_RANK", "1"},
            {"OMPI_COMM_WORLD_SIZE", "2"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(e.master_addr, "127.0.0.1");
}

TEST(DistEnv, Slurm) {
  Env env = {{"SLURM_PROCID", "4"},
             {"SLURM_STEP_NUM_TASKS", "7"},
             {"SLURM_LOCALID", "0"},
             {"SLURM_NODEID", "2"},
             {"SLURM_STEP_TASKS_PER_NODE", "2(x2),3"},
             {"SLURM_STEP_NODELIST", "gpu[07-09],cpu1"},
             {"SLURM_JOB_ID", "123456"}};
  DistEnv e = read(env);
  EXPECT_EQ(e.source, "slurm");
  EXPECT_EQ(e.rank, 4);
  EXPECT_EQ(e.world_size, 7);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 3);
  EXPECT_EQ(e.node_rank, 2);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 15000 + 123456 % 10000);
  env["MASTER_ADDR"] = "10.0.0.1";
  env["MASTER_PORT"] = "4000";
  e = read(env);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 4000);
}

TEST(DistEnv, BadValuesNameTheVariable) {
  EXPECT_THAT(error_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}),
              HasSubstr("RANK='x': expected an integer"));
  EXPECT_THAT(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
              HasSubstr("the rank must be in [0, world size)"));
  EXPECT_THAT(
      error_of(
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
      HasSubstr("the local rank must be in [0, local world size)"));
  EXPECT_THAT(error_of({{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "1"}}),
              HasSubstr("SLURM_STEP_NODELIST"));
}

// Issue 31, item 3: the job's dist.master_addr / dist.master_port are used
// when the environment gives no MASTER_ADDR / MASTER_PORT, and lose to it
// when it does; DistEnv says which was used.
rh::launch::JobRendezvousKeys job_keys(const std::string& addr, int port) {
  rh::launch::JobRendezvousKeys k;
  k.master_addr = addr;
  k.master_addr_at = "job.yaml:9:17";
  k.master_port = port;
  k.master_port_at = "job.yaml:9:41";
  return k;
}

DistEnv read_with(const Env& env, const rh::launch::JobRendezvousKeys& job) {
  return read_dist_env(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      job);
}

TEST(DistEnv, TheJobsMasterKeysApplyWhenTheEnvironmentHasNone) {
  const auto job = job_keys("10.0.0.7", 29611);
  DistEnv e = read_with({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, job);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29611);
  EXPECT_EQ(e.master_addr_from, "dist.master_addr at job.yaml:9:17");
  EXPECT_EQ(e.master_port_from, "dist.master_port at job.yaml:9:41");
  // The environment wins, each value on its own.
  e = read_with({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "4000"}}, job);
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 4000);
  EXPECT_EQ(e.master_port_from, "MASTER_PORT");
  e = read_with({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node0"}}, job);
  EXPECT_EQ(e.master_addr, "node0");
  EXPECT_EQ(e.master_addr_from, "MASTER_ADDR");
  EXPECT_EQ(e.master_port, 29611);
  // Nothing anywhere: the defaults, said so.
  e = read_with({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, {});
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.master_port_from, "the default");
  // The built-in launcher says where its values came from.
  e = read_with({{"RANK", "1"},
                 {"WORLD_SIZE", "2"},
                 {"RH_LAUNCHED", "1"},
                 {"MASTER_ADDR", "127.0.0.1"},
                 {"MASTER_PORT", "29611"},
                 {"RH_MASTER_ADDR_FROM", "the default"},
                 {"RH_MASTER_PORT_FROM", "dist.master_port at job.yaml:9:41"}},
                job);
  EXPECT_EQ(e.master_addr_from, "the default");
  EXPECT_EQ(e.master_port_from, "dist.master_port at job.yaml:9:41");
}

TEST(DistEnv, TheJobsMasterKeysUnderSrunAndMpirun) {
  Env slurm = {{"SLURM_PROCID", "1"},
               {"SLURM_STEP_NUM_TASKS", "2"},
               {"SLURM_STEP_NODELIST", "gpu[07-08]"},
               {"SLURM_JOB_ID", "123456"}};
  // The job's keys over what srun's variables give by default...
  DistEnv e = read_with(slurm, job_keys("10.0.0.7", 29611));
  EXPECT_EQ(e.master_addr, "10.0.0.7");
  EXPECT_EQ(e.master_port, 29611);
  EXPECT_EQ(e.master_port_from, "dist.master_port at job.yaml:9:41");
  e = read_with(slurm, {});
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_addr_from, "SLURM_STEP_NODELIST");
  EXPECT_EQ(e.master_port_from, "SLURM_JOB_ID");
  // ...and MASTER_ADDR/MASTER_PORT over the job's keys.
  slurm["MASTER_PORT"] = "4000";
  EXPECT_EQ(read_with(slurm, job_keys("10.0.0.7", 29611)).master_port, 4000);
  // mpirun across nodes: dist.master_addr is a master address.
  Env mpi = {{"OMPI_COMM_WORLD_RANK", "5"},
             {"OMPI_COMM_WORLD_SIZE", "8"},
             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
             {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  e = read_with(mpi, job_keys("host0", 29611));
  EXPECT_EQ(e.master_addr, "host0");
  EXPECT_EQ(e.master_port, 29611);
}

TEST(DistEnv, AFreePortFromTheJobNeedsTheLauncher) {
  try {
    read_with({{"RANK", "1"}, {"WORLD_SIZE", "2"}}, job_keys("127.0.0.1", 0));
    ADD_FAILURE() << "dist.master_port: 0 without the launcher must be refused";
  } catch (const rh::launch::JobKeyError& e) {
    EXPECT_EQ(e.key(), "dist.master_port");
    EXPECT_THAT(e.what(),
                HasSubstr("0 (pick a free port) needs the built-in launcher on one node"));
  }
  // A port from the environment makes the job's 0 moot.
  EXPECT_EQ(read_with({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "4000"}},
                      job_keys("127.0.0.1", 0))
                .master_port,
            4000);
}

// Issue 31, item 8: the job id the rendezvous store keys carry. Ranks of one
// job arrive at the same id; ranks of two jobs at different ones.
TEST(DistEnv, JobIds) {
  Env torchrun = {{"RANK", "0"},
                  {"WORLD_SIZE", "2"},
                  {"MASTER_ADDR", "127.0.0.1"},
                  {"MASTER_PORT", "29500"},
                  {"TORCHELASTIC_RUN_ID", "run-a"},
                  {"TORCHELASTIC_RESTART_COUNT", "0"}};
  const DistEnv a0 = read(torchrun);
  torchrun["RANK"] = "1";
  const DistEnv a1 = read(torchrun);
  EXPECT_EQ(a0.job_id, a1.job_id);
  EXPECT_EQ(a0.job_id.size(), 16u);
  EXPECT_THAT(a0.job_origin, HasSubstr("torchrun run run-a, restart 0"));
  torchrun["TORCHELASTIC_RUN_ID"] = "run-b";
  EXPECT_NE(read(torchrun).job_id, a0.job_id);
  torchrun["TORCHELASTIC_RUN_ID"] = "run-a";
  torchrun["TORCHELASTIC_RESTART_COUNT"] = "1";
  EXPECT_NE(read(torchrun).job_id, a0.job_id);
  // RH_JOB_ID wins (the launcher sets it).
  torchrun["RH_JOB_ID"] = "00000000deadbeef";
  EXPECT_EQ(read(torchrun).job_id, "00000000deadbeef");
  // srun: the job and the step.
  Env slurm = {{"SLURM_PROCID", "0"},
               {"SLURM_STEP_NUM_TASKS", "2"},
               {"SLURM_STEP_NODELIST", "n1"},
               {"SLURM_JOB_ID", "77"},
               {"SLURM_STEP_ID", "0"}};
  const std::string step0 = read(slurm).job_id;
  slurm["SLURM_PROCID"] = "1";
  EXPECT_EQ(read(slurm).job_id, step0);
  slurm["SLURM_STEP_ID"] = "1";
  EXPECT_NE(read(slurm).job_id, step0);
  // One process: no id (the runner makes a random one).
  EXPECT_EQ(read({}).job_id, "");
  EXPECT_NE(rh::launch::random_job_id(), rh::launch::random_job_id());
}

// torchrun's default (static) rendezvous: its agent hosts the store.
TEST(DistEnv, TorchrunsAgentStore) {
  const DistEnv e = read({{"RANK", "0"},
                          {"WORLD_SIZE", "2"},
                          {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                          {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(e.agent_store);
  EXPECT_EQ(e.restart_count, 2);
  EXPECT_FALSE(read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"TORCHELASTIC_USE_AGENT_STORE", "False"}})
                   .agent_store);
}

// Which start of the job this is (a restarted job resumes), and what the
// elastic launcher tells its workers.
TEST(DistEnv, RestartsAndTheElasticLauncher) {
  DistEnv e = read({{"RANK", "0"},
                    {"WORLD_SIZE", "2"},
                    {"TORCHELASTIC_RESTART_COUNT", "2"},
                    {"SLURM_RESTART_COUNT", "5"},
                    {"RH_ELASTIC_BASE_WORLD_SIZE", "4"},
                    {"RH_ELASTIC_DETECTED_AT", "1796434219.25"}});
  EXPECT_EQ(e.job_restart, 2);
  EXPECT_EQ(e.job_restart_from, "TORCHELASTIC_RESTART_COUNT");
  EXPECT_EQ(e.elastic_base_world_size, 4);
  EXPECT_DOUBLE_EQ(e.elastic_detected_at, 1796434219.25);
  // A requeued SLURM job, even as a single process.
  e = read({{"SLURM_RESTART_COUNT", "1"}});
  EXPECT_EQ(e.job_restart, 1);
  EXPECT_EQ(e.job_restart_from, "SLURM_RESTART_COUNT");
  EXPECT_EQ(e.elastic_base_world_size, 0);
  e = read({});
  EXPECT_EQ(e.job_restart, 0);
  EXPECT_EQ(e.job_restart_from, "");
  EXPECT_THAT(error_of({{"SLURM_RESTART_COUNT", "-1"}}),
              HasSubstr("SLURM_RESTART_COUNT=-1: expected 0 or more"));
  EXPECT_THAT(error_of({{"RH_ELASTIC_BASE_WORLD_SIZE", "0"}}),
              HasSubstr("RH_ELASTIC_BASE_WORLD_SIZE=0 (set by runner-host's elastic launcher)"));
  EXPECT_THAT(error_of({{"RH_ELASTIC_DETECTED_AT", "soon"}}),
              HasSubstr("RH_ELASTIC_DETECTED_AT='soon' (set by runner-host's elastic launcher): "
                        "expected seconds since the epoch"));
}

// The launcher's master address and port: the flag, else its environment,
// else the job, else the default (on one node a free port).
TEST(LaunchOptions, FlagsThenEnvironmentThenTheJob) {
  using rh::launch::launch_options;
  using rh::launch::LauncherFlags;
  Env env;
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  const auto job = job_keys("10.0.0.7", 29611);
  LauncherFlags flags;
  flags.nproc_per_node = 2;
  auto o = launch_options(flags, get, {});
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 0) << "one node, no port given: a free one";
  o = launch_options(flags, get, job);
  EXPECT_EQ(o.master_addr, "10.0.0.7");
  EXPECT_EQ(o.master_port, 29611);
  EXPECT_EQ(o.master_addr_from, "dist.master_addr at job.yaml:9:17");
  EXPECT_EQ(o.master_port_from, "dist.master_port at job.yaml:9:41");
  env["MASTER_ADDR"] = "node0";
  env["MASTER_PORT"] = "4000";
  o = launch_options(flags, get, job);
  EXPECT_EQ(o.master_addr, "node0");
  EXPECT_EQ(o.master_port, 4000);
  EXPECT_EQ(o.master_port_from, "MASTER_PORT");
  flags.master_addr = "h";
  flags.master_port = 5000;
  o = launch_options(flags, get, job);
  EXPECT_EQ(o.master_addr, "h");
  EXPECT_EQ(o.master_port, 5000);
  EXPECT_EQ(o.master_addr_from, "--master-addr");
  EXPECT_EQ(o.master_port_from, "--master-port");
  // Several nodes, no port anywhere: torchrun's 29500, the same on every node.
  env.clear();
  LauncherFlags nodes;
  nodes.nnodes = 2;
  EXPECT_EQ(launch_options(nodes, get, {}).master_port, 29500);
  env["MASTER_PORT"] = "port";
  try {
    launch_options(nodes, get, {});
    ADD_FAILURE() << "MASTER_PORT=port must be refused";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("MASTER_PORT='port' (the launcher's environment)"));
  }
}

TEST(DistEnv, FirstSlurmHost) {
  EXPECT_EQ(rh::launch::first_slurm_host("node1"), "node1");
  EXPECT_EQ(rh::launch::first_slurm_host("a,b"), "a");
  EXPECT_EQ(rh::launch::first_slurm_host("gnode[10,20,25]"), "gnode10");
  EXPECT_EQ(rh::launch::first_slurm_host("n[003-005,9],m1"), "n003");
  EXPECT_EQ(rh::launch::first_slurm_host("rack[1-2]-n[01-04]"), "rack1-n01");
}

TEST(IntraOpThreads, CoresShareAmongTheLocalRanks) {
  // The environment is process-wide: set and restore by hand.
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string omp_saved = omp ? omp : "";
  unsetenv("OMP_NUM_THREADS");
  unsetenv("LOCAL_WORLD_SIZE");
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("LOCAL_RANK", "1", 1);
  setenv("LOCAL_WORLD_SIZE", "2", 1);
  const int cores = rh::launch::available_cores();
  EXPECT_EQ(rh::launch::default_intra_op_threads(), std::max(1, cores / 2));
  setenv("OMP_NUM_THREADS", "3", 1);
  EXPECT_EQ(rh::launch::default_intra_op_threads(), 3);
  unsetenv("OMP_NUM_THREADS");
  for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) unsetenv(name);
  EXPECT_EQ(rh::launch::default_intra_op_threads(), cores);
  if (omp) setenv("OMP_NUM_THREADS", omp_saved.c_str(), 1);
}

TEST(RankLogging, OnlyRankZeroLogsInfo) {
  auto logger = std::make_shared<spdlog::logger>("rank-logging-test",
                                                 std::make_shared<spdlog::sinks::null_sink_mt>());
  spdlog::register_logger(logger);
  auto quiet = std::make_shared<spdlog::logger>("rank-logging-quiet",
                                                std::make_shared<spdlog::sinks::null_sink_mt>());
  spdlog::register_logger(quiet);
  const auto saved = spdlog::default_logger()->level();
  unsetenv("RH_LOG_ALL_RANKS");

  spdlog::set_level(spdlog::level::info);
  rh::launch::configure_rank_logging(0);
  EXPECT_EQ(logger->level(), spdlog::level::info);

  quiet->set_level(spdlog::level::err);
  rh::launch::configure_rank_logging(1);
  EXPECT_EQ(logger->level(), spdlog::level::warn);
  EXPECT_EQ(quiet->level(), spdlog::level::err) << "a quieter logger stays quieter";

  spdlog::set_level(spdlog::level::info);
  setenv("RH_LOG_ALL_RANKS", "1", 1);
  rh::launch::configure_rank_logging(1);
  EXPECT_EQ(logger->level(), spdlog::level::info);
  unsetenv("RH_LOG_ALL_RANKS");

  spdlog::drop("rank-logging-test");
  spdlog::drop("rank-logging-quiet");
  spdlog::set_level(saved);
}

TEST(StripLauncherFlags, BothFormsAndPrefixes) {
  using rh::launch::strip_launcher_flags;
  EXPECT_THAT(strip_launcher_flags({"--nproc-per-node", "2", "--config", "job.yaml"}),
              ElementsAre("--config", "job.yaml"));
  EXPECT_THAT(strip_launcher_flags({"--config=j.yaml", "--nproc-per-node=2", "--nnodes", "2",
                                    "--node-rank=1", "--master-addr", "h", "--master-port=0",
                                    "--set", "a=1"}),
              ElementsAre("--config=j.yaml", "--set", "a=1"));
  // Boost.Program_options accepts an unambiguous prefix: so does the strip.
  EXPECT_THAT(strip_launcher_flags({"--nproc", "2", "--version"}), ElementsAre("--version"));
  EXPECT_THAT(strip_launcher_flags({"--master-a=h", "--version"}), ElementsAre("--version"));
  // Not ours: an ambiguous prefix, other options, values that look like flags
  // of another option, and everything after `--`.
  EXPECT_THAT(strip_launcher_flags({"--master", "x"}), ElementsAre("--master", "x"));
  EXPECT_THAT(strip_launcher_flags({"--set", "nnodes=2", "--", "--nnodes", "2"}),
              ElementsAre("--set", "nnodes=2", "--", "--nnodes", "2"));
  EXPECT_THAT(strip_launcher_flags({"--nnodes"}), ElementsAre());
  EXPECT_THAT(strip_launcher_flags({"--max-restarts", "3", "--min-nodes=1", "--config", "j"}),
              ElementsAre("--config", "j"));
}

}  // namespace
