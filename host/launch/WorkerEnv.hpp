// What a worker learns from its environment: its rank and world, whoever
// started it (the built-in launcher, torchrun --no-python, SLURM's srun or
// Open MPI's mpirun), how many intra-op threads it should use, and whether it
// logs at info. No LibTorch here.
#pragma once

#include <functional>
#include <string>

namespace rh::launch {

struct DistEnv {
  // Who set the environment: "launcher" (runner-host --nproc-per-node),
  // "torchrun" (RANK/WORLD_SIZE: torchrun or a hand-made env://), "openmpi",
  // "slurm", or "none" (a single process: rank 0 of 1).
  std::string source = "none";
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};

// Looks up an environment variable: nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Reads the distributed setting, first match wins:
//   1. RANK and WORLD_SIZE (the launcher, torchrun): LOCAL_RANK, LOCAL_WORLD_SIZE
//      (default: RANK and WORLD_SIZE, i.e. one node), GROUP_RANK (default
//      RANK / LOCAL_WORLD_SIZE), MASTER_ADDR (127.0.0.1), MASTER_PORT (29500).
//   2. OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE (mpirun); node rank
//      RANK / LOCAL_SIZE. MASTER_ADDR (pass it with mpirun -x) is required when
//      the world spans more than one node; MASTER_PORT defaults to 29500.
//      Checked before SLURM because mpirun inside an allocation inherits
//      SLURM variables that describe its daemons, not the ranks.
//   3. SLURM_PROCID with SLURM_STEP_NUM_TASKS (srun; a batch script's own shell
//      has SLURM_PROCID but no step and stays "none"): SLURM_LOCALID,
//      SLURM_NODEID, local world size from SLURM_STEP_TASKS_PER_NODE (e.g.
//      "2(x3),1") at SLURM_NODEID, else SLURM_NTASKS_PER_NODE; MASTER_ADDR
//      else the first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST;
//      MASTER_PORT else 15000 + SLURM_JOB_ID % 10000 (the same on all nodes).
// Throws std::runtime_error naming the variable when a value is not an
// integer or is out of range (rank >= world size, ...).
DistEnv read_dist_env(const EnvLookup& get);
DistEnv dist_env_from_environment();  // read_dist_env over getenv

// The first host of a SLURM node list: "gpu[03-05,9],cpu1" -> "gpu03".
std::string first_slurm_host(const std::string& nodelist);

// True in a worker started by the built-in launcher (RH_LAUNCHED=1).
bool is_launched_worker();

// The intra-op thread count a worker should use, so that the ranks of a node
// do not oversubscribe its cores:
//   OMP_NUM_THREADS when set to a positive integer (the launcher sets it to
//   the value below unless the user did; torchrun sets it to 1 by default);
//   else SLURM_CPUS_PER_TASK under srun;
//   else max(1, available_cores() / local world size), the local world size
//   read as read_dist_env does (1 when unset or unreadable).
// For the runner: at::set_num_threads(default_intra_op_threads()) unless the
// job says otherwise.
int default_intra_op_threads();

// Rank-0-only logging: for rank != 0, raises every spdlog logger's level to at
// least warn, unless RH_LOG_ALL_RANKS=1. Call it after the job's log_level was
// applied (spdlog::set_level would lower it again).
void configure_rank_logging(int rank);

}  // namespace rh::launch
