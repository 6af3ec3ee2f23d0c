// process_env_from_environment for the variables of torchrun, Open MPI and
// SLURM, and malformed values.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "comm/Communicator.hpp"

namespace {

const char* const kAll[] = {"RANK",
                            "WORLD_SIZE",
                            "LOCAL_RANK",
                            "LOCAL_WORLD_SIZE",
                            "MASTER_ADDR",
                            "MASTER_PORT",
                            "OMPI_COMM_WORLD_RANK",
                            "OMPI_COMM_WORLD_SIZE",
                            "OMPI_COMM_WORLD_LOCAL_RANK",
                            "OMPI_COMM_WORLD_LOCAL_SIZE",
                            "SLURM_PROCID",
                            "SLURM_NTASKS",
                            "SLURM_LOCALID",
                            "SLURM_NTASKS_PER_NODE",
                            "SLURM_TASKS_PER_NODE",
                            "SLURM_NODEID",
                            "SLURM_STEP_NODELIST"};

// Sets exactly `vars` among the launcher variables; restores them after.
class Env {
 public:
  explicit Env(const std::map<std::string, std::string>& vars) {
    for (const char* name : kAll) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ~Env() {
    for (const char* name : kAll) ::unsetenv(name);
    for (const auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

std::string error_of(const std::map<std::string, std::string>& vars) {
  Env env(vars);
  try {
    rh::comm::process_env_from_environment();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ProcessEnvTest, NothingSetIsASingleProcess) {
  Env env({});
  EXPECT_FALSE(rh::comm::process_env_from_environment().has_value());
}

TEST(ProcessEnvTest, Torchrun) {
  Env env({{"RANK", "5"},
           {"WORLD_SIZE", "8"},
           {"LOCAL_RANK", "1"},
           {"LOCAL_WORLD_SIZE", "4"},
           {"MASTER_ADDR", "node7"},
           {"MASTER_PORT", "29400"}});
  auto e = rh::comm::process_env_from_environment();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->source, "torchrun");
  EXPECT_EQ(e->rank, 5);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->master_addr, "node7");
  EXPECT_EQ(e->master_port, 29400);
}

TEST(ProcessEnvTest, HandMadeRankAndWorldSizeIsOneNodeOnTheDefaultMaster) {
  Env env({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  auto e = rh::comm::process_env_from_environment();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "127.0.0.1");
  EXPECT_EQ(e->master_port, 29500);
}

TEST(ProcessEnvTest, OpenMpi) {
  Env env({{"OMPI_COMM_WORLD_RANK", "3"},
           {"OMPI_COMM_WORLD_SIZE", "4"},
           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
           {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
           {"MASTER_ADDR", "10.0.0.1"},
           // An mpirun inside a SLURM allocation: Open MPI's variables win.
           {"SLURM_PROCID", "0"},
           {"SLURM_NTASKS", "1"},
           {"SLURM_LOCALID", "0"}});
  auto e = rh::comm::process_env_from_environment();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->source, "openmpi");
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 4);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->master_addr, "10.0.0.1");
  EXPECT_EQ(e->master_port, 29500);
}

TEST(ProcessEnvTest, Slurm) {
  Env env({{"SLURM_PROCID", "6"},
           {"SLURM_NTASKS", "8"},
           {"SLURM_LOCALID", "2"},
           {"SLURM_NTASKS_PER_NODE", "4"},
           {"SLURM_STEP_NODELIST", "gpu[01-02]"},
           {"MASTER_ADDR", "gpu01"},
           {"MASTER_PORT", "12345"}});
  auto e = rh::comm::process_env_from_environment();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->source, "slurm");
  EXPECT_EQ(e->rank, 6);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 2);
  EXPECT_EQ(e->local_world_size, 4);
  EXPECT_EQ(e->master_addr, "gpu01");
  EXPECT_EQ(e->master_port, 12345);
}

TEST(ProcessEnvTest, SlurmTasksPerNodeListWhenNtasksPerNodeIsUnset) {
  Env env({{"SLURM_PROCID", "4"},
           {"SLURM_NTASKS", "5"},
           {"SLURM_LOCALID", "0"},
           {"SLURM_TASKS_PER_NODE", "2(x2),1"},
           {"SLURM_NODEID", "2"},
           {"MASTER_ADDR", "n0"}});
  auto e = rh::comm::process_env_from_environment();
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->local_world_size, 1);
}

TEST(ProcessEnvTest, TorchrunWinsOverSlurm) {
  Env env({{"RANK", "1"},
           {"WORLD_SIZE", "2"},
           {"SLURM_PROCID", "0"},
           {"SLURM_NTASKS", "1"},
           {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(rh::comm::process_env_from_environment()->source, "torchrun");
}

TEST(ProcessEnvTest, MalformedValuesNameTheVariable) {
  std::string m = error_of({{"RANK", "abc"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(m.find("RANK='abc' is not an integer"), std::string::npos) << m;
  m = error_of({{"RANK", "0"}, {"WORLD_SIZE", "2x"}});
  EXPECT_NE(m.find("WORLD_SIZE='2x'"), std::string::npos) << m;
  m = error_of({{"RANK", "-1"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(m.find("RANK='-1' is out of range"), std::string::npos) << m;
  m = error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}});
  EXPECT_NE(m.find("RANK=2 is not below WORLD_SIZE=2"), std::string::npos) << m;
  m = error_of({{"RANK", "0"}});
  EXPECT_NE(m.find("WORLD_SIZE is not set"), std::string::npos) << m;
  m = error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}});
  EXPECT_NE(m.find("MASTER_PORT='70000' is out of range"), std::string::npos) << m;
  m = error_of(
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "2"}});
  EXPECT_NE(m.find("LOCAL_RANK=3 is not below LOCAL_WORLD_SIZE=2"), std::string::npos) << m;
  m = error_of({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_NE(m.find("OMPI_COMM_WORLD_LOCAL_RANK is not set"), std::string::npos) << m;
  m = error_of({{"SLURM_PROCID", "zero"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}});
  EXPECT_NE(m.find("SLURM_PROCID='zero'"), std::string::npos) << m;
  m = error_of({{"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "2"},
                {"SLURM_LOCALID", "0"},
                {"SLURM_NTASKS_PER_NODE", "many"}});
  EXPECT_NE(m.find("SLURM_NTASKS_PER_NODE='many'"), std::string::npos) << m;
}

TEST(ProcessEnvTest, SeveralNodesNeedMasterAddr) {
  std::string m = error_of({{"SLURM_PROCID", "0"},
                            {"SLURM_NTASKS", "4"},
                            {"SLURM_LOCALID", "0"},
                            {"SLURM_NTASKS_PER_NODE", "2"}});
  EXPECT_NE(m.find("MASTER_ADDR is not set"), std::string::npos) << m;
}

}  // namespace
