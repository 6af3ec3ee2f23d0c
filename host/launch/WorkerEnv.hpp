// What a worker learns from its environment: its rank and world, whoever
// started it (the built-in launcher, torchrun --no-python, SLURM's srun or
// Open MPI's mpirun), how many intra-op threads it should use, and whether it
// logs at info. No LibTorch here.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

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
  // Where master_addr and master_port came from, for the log ("rendezvous at
  // 10.0.0.1:29500 (address from MASTER_ADDR, port from dist.master_port at
  // job.yaml:9:30)") and for messages: "MASTER_ADDR", "MASTER_PORT", what
  // the built-in launcher says it used (RH_MASTER_ADDR_FROM,
  // RH_MASTER_PORT_FROM: "--master-port", "the launcher, which picked a free
  // port", ...), "dist.master_addr at FILE:LINE:COL", "SLURM_STEP_NODELIST",
  // "SLURM_JOB_ID", or "the default".
  std::string master_addr_from = "the default";
  std::string master_port_from = "the default";
  // The job's id: every key of the run's rendezvous store carries it, and a
  // rank that reaches the store of a job with another id stops with a message
  // naming both (comm::RendezvousOptions::job_id). RH_JOB_ID when set (the
  // built-in launcher sets a random one); otherwise a hash of what the ranks
  // of one job share (job_origin); "" for a single process ("none").
  std::string job_id;
  // How job_id was made, for messages: "made by the runner-host launcher",
  // "RH_JOB_ID", "torchrun run 5c1f..., restart 0, rendezvous at
  // node0:29500, 8 ranks", "SLURM job 123 step 0, ...".
  std::string job_origin;
  // torchrun's static rendezvous (its default): its agent hosts the store at
  // MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), so every
  // rank, rank 0 included, connects to it as a client, with its keys under
  // /worker/attempt_<restart_count> (TORCHELASTIC_RESTART_COUNT), as
  // PyTorch's own workers do.
  bool agent_store = false;
  int restart_count = 0;
  // Which start of the job this is, 0 the first, and the variable that says
  // so: TORCHELASTIC_RESTART_COUNT (torchrun, or runner-host --max-restarts),
  // else SLURM_RESTART_COUNT (a requeued SLURM job); "" when neither is set.
  // A restarted job resumes from the newest valid checkpoint of work_dir
  // whatever `resume` says (RunCheckpoints::find_resume).
  int job_restart = 0;
  std::string job_restart_from;
  // Set by runner-host's elastic launcher (--max-restarts): the first
  // round's world size, whose global batch a smaller world keeps
  // (dist.elastic_batch), 0 when not elastic; and when the launcher learned
  // of the failure this round follows (seconds since the epoch, 0 for none),
  // for the time to recover.
  int elastic_base_world_size = 0;
  double elastic_detected_at = 0;
};

// The wall clock in seconds since the epoch: the one clock the elastic
// launcher stamps RH_ELASTIC_DETECTED_AT with and a worker reads it against.
double seconds_since_epoch();

// The job's own rendezvous keys (dist.master_addr, dist.master_port), with
// where each is written ("job.yaml:9:30"), for read_dist_env and the
// launcher: the environment and the launcher's flags win over them.
struct JobRendezvousKeys {
  std::optional<std::string> master_addr;
  std::string master_addr_at;
  std::optional<int> master_port;
  std::string master_port_at;
  // dist.timeout_s: how long the elastic launcher waits for a round to close.
  std::optional<double> timeout_s;
};

// A job key that cannot be used where the job runs (dist.master_port: 0,
// "pick a free port", reaching a worker that no built-in launcher started):
// `key` is its dotted path, what() the reason without the location.
class JobKeyError : public std::runtime_error {
 public:
  JobKeyError(std::string key, const std::string& message)
      : std::runtime_error(message), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// "dist.master_port at job.yaml:9:30" (or the bare key when `at` is empty).
std::string job_key_label(const std::string& key, const std::string& at);

// Looks up an environment variable: nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

// Reads the distributed setting, first match wins:
//   1. RANK and WORLD_SIZE (the launcher, torchrun): LOCAL_RANK, LOCAL_WORLD_SIZE
//      (default: RANK and WORLD_SIZE, i.e. one node), GROUP_RANK (default
//      RANK / LOCAL_WORLD_SIZE).
//   2. OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE (mpirun); node rank
//      RANK / LOCAL_SIZE. A master address (MASTER_ADDR, pass it with mpirun
//      -x, or dist.master_addr) is required when the world spans more than
//      one node. Checked before SLURM because mpirun inside an allocation
//      inherits SLURM variables that describe its daemons, not the ranks.
//   3. SLURM_PROCID with SLURM_STEP_NUM_TASKS (srun; a batch script's own shell
//      has SLURM_PROCID but no step and stays "none"): SLURM_LOCALID,
//      SLURM_NODEID, local world size from SLURM_STEP_TASKS_PER_NODE (e.g.
//      "2(x3),1") at SLURM_NODEID, else SLURM_NTASKS_PER_NODE.
// The master address and port, first found wins: MASTER_ADDR / MASTER_PORT
// (what a launcher exported), then the job's dist.master_addr /
// dist.master_port (`job`), then the default: 127.0.0.1 and 29500; under srun
// the first host of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST and 15000 +
// SLURM_JOB_ID % 10000 (the same on all nodes). A job's dist.master_port of 0
// ("a free port", which only the built-in launcher on one node can pick)
// reaching here throws JobKeyError.
// Throws std::runtime_error naming the variable when a value is not an
// integer or is out of range (rank >= world size, ...).
DistEnv read_dist_env(const EnvLookup& get, const JobRendezvousKeys& job = {});
// read_dist_env over getenv.
DistEnv dist_env_from_environment(const JobRendezvousKeys& job = {});

// A fresh random 64-bit job id, as 16 hex digits.
std::string random_job_id();
// A 64-bit job id (16 hex digits) made from `shared`: what every rank of one
// job sees alike.
std::string job_id_from(const std::string& shared);

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
