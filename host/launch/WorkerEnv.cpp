#include "launch/WorkerEnv.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "launch/Launcher.hpp"

namespace rh::launch {
namespace {

std::optional<std::string> lookup(const EnvLookup& get, const char* name) {
  const char* v = get(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

int parse_int(const std::string& name, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (end == value.c_str() || *end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX)
    throw std::runtime_error(name + "='" + value + "': expected an integer");
  return static_cast<int>(v);
}

std::optional<int> int_var(const EnvLookup& get, const char* name) {
  auto v = lookup(get, name);
  if (!v) return std::nullopt;
  return parse_int(name, *v);
}

int required_int(const EnvLookup& get, const char* name, const std::string& why) {
  auto v = int_var(get, name);
  if (!v) throw std::runtime_error(name + std::string(" is not set (") + why + ")");
  return *v;
}

// "2(x3),1" -> {2, 2, 2, 1}
std::vector<int> expand_tasks_per_node(const std::string& name, const std::string& value) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    std::string item =
        value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    int repeat = 1;
    size_t paren = item.find("(x");
    if (paren != std::string::npos) {
      if (item.back() != ')')
        throw std::runtime_error(name + "='" + value + "': cannot read '" + item + "'");
      repeat = parse_int(name, item.substr(paren + 2, item.size() - paren - 3));
      item = item.substr(0, paren);
    }
    const int tasks = parse_int(name, item);
    for (int i = 0; i < repeat; ++i) out.push_back(tasks);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void check(DistEnv& e, const std::string& what) {
  auto bad = [&](const std::string& msg) {
    throw std::runtime_error(what + ": " + msg + " (rank " + std::to_string(e.rank) +
                             ", world size " + std::to_string(e.world_size) + ", local rank " +
                             std::to_string(e.local_rank) + ", local world size " +
                             std::to_string(e.local_world_size) + ")");
  };
  if (e.world_size < 1) bad("the world size must be 1 or more");
  if (e.rank < 0 || e.rank >= e.world_size) bad("the rank must be in [0, world size)");
  if (e.local_world_size < 1 || e.local_world_size > e.world_size)
    bad("the local world size must be in [1, world size]");
  if (e.local_rank < 0 || e.local_rank >= e.local_world_size)
    bad("the local rank must be in [0, local world size)");
  if (e.node_rank < 0) bad("the node rank must be 0 or more");
  if (e.master_port < 1 || e.master_port > 65535) bad("the master port must be in [1, 65535]");
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first top-level item (commas inside brackets do not count).
  std::string item;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    item += c;
  }
  // Each bracket group gives its first value: "n[03-05,9]" -> "n03".
  std::string host;
  for (size_t i = 0; i < item.size(); ++i) {
    if (item[i] != '[') {
      host += item[i];
      continue;
    }
    size_t close = item.find(']', i);
    if (close == std::string::npos) close = item.size();
    std::string group = item.substr(i + 1, close - i - 1);
    host += group.substr(0, group.find_first_of(",-"));
    i = close;
  }
  return host;
}

std::string job_key_label(const std::string& key, const std::string& at) {
  return at.empty() ? key : key + " at " + at;
}

std::string job_id_from(const std::string& shared) {
  // FNV-1a, 64 bits: the same on every rank, whatever its build.
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : shared) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

std::string random_job_id() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(v));
  return text;
}

namespace {

// MASTER_ADDR, else the job's dist.master_addr, else `fallback` (from
// `fallback_from`); the same for the port. The built-in launcher says where
// its values came from (RH_MASTER_ADDR_FROM, RH_MASTER_PORT_FROM).
void choose_master(DistEnv& e, const EnvLookup& get, const JobRendezvousKeys& job,
                   const std::optional<std::string>& fallback_addr,
                   const std::string& fallback_addr_from, int fallback_port,
                   const std::string& fallback_port_from) {
  const bool launched = e.source == "launcher";
  if (auto addr = lookup(get, "MASTER_ADDR")) {
    e.master_addr = *addr;
    e.master_addr_from =
        launched ? lookup(get, "RH_MASTER_ADDR_FROM").value_or("MASTER_ADDR") : "MASTER_ADDR";
  } else if (job.master_addr && !job.master_addr->empty()) {
    e.master_addr = *job.master_addr;
    e.master_addr_from = job_key_label("dist.master_addr", job.master_addr_at);
  } else if (fallback_addr) {
    e.master_addr = *fallback_addr;
    e.master_addr_from = fallback_addr_from;
  }
  if (auto port = int_var(get, "MASTER_PORT")) {
    e.master_port = *port;
    e.master_port_from =
        launched ? lookup(get, "RH_MASTER_PORT_FROM").value_or("MASTER_PORT") : "MASTER_PORT";
  } else if (job.master_port) {
    if (*job.master_port == 0)
      throw JobKeyError(
          "dist.master_port",
          "0 (pick a free port) needs the built-in launcher on one node (runner-host "
          "--nproc-per-node N), which hands the port it picked to every rank; here (" +
              std::string(e.source == "slurm"     ? "srun"
                          : e.source == "openmpi" ? "mpirun"
                                                  : "RANK/WORLD_SIZE from torchrun or by hand") +
              ") every rank must be given the same port: set one, or MASTER_PORT");
    e.master_port = *job.master_port;
    e.master_port_from = job_key_label("dist.master_port", job.master_port_at);
  } else {
    e.master_port = fallback_port;
    e.master_port_from = fallback_port_from;
  }
}

// RH_JOB_ID, else a hash of `shared` (what every rank of the job sees alike).
void choose_job_id(DistEnv& e, const EnvLookup& get, std::string shared) {
  if (auto id = lookup(get, "RH_JOB_ID")) {
    e.job_id = *id;
    e.job_origin = e.source == "launcher" ? "made by the runner-host launcher" : "RH_JOB_ID";
    return;
  }
  shared += ", rendezvous at " + e.master_addr + ":" + std::to_string(e.master_port) + ", " +
            std::to_string(e.world_size) + " ranks";
  e.job_id = job_id_from(shared);
  e.job_origin = shared;
}

}  // namespace

namespace {

// The launcher's part of the environment (read_dist_env below).
DistEnv read_launch_source(const EnvLookup& get, const JobRendezvousKeys& job) {
  DistEnv e;
  if (lookup(get, "RANK") && lookup(get, "WORLD_SIZE")) {
    const bool launched = lookup(get, "RH_LAUNCHED").value_or("") == "1";
    e.source = launched ? "launcher" : "torchrun";
    e.rank = required_int(get, "RANK", "");
    e.world_size = required_int(get, "WORLD_SIZE", "");
    e.local_rank = int_var(get, "LOCAL_RANK").value_or(e.rank);
    e.local_world_size = int_var(get, "LOCAL_WORLD_SIZE").value_or(e.world_size);
    e.node_rank = int_var(get, "GROUP_RANK")
                      .value_or(e.local_world_size > 0 ? e.rank / e.local_world_size : 0);
    choose_master(e, get, job, std::string("127.0.0.1"), "the default", 29500, "the default");
    check(e, "RANK/WORLD_SIZE environment");
    e.agent_store = lookup(get, "TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    e.restart_count = int_var(get, "TORCHELASTIC_RESTART_COUNT").value_or(0);
    std::string shared = "RANK/WORLD_SIZE environment";
    if (auto run = lookup(get, "TORCHELASTIC_RUN_ID"))
      shared = "torchrun run " + *run + ", restart " + std::to_string(e.restart_count);
    choose_job_id(e, get, shared);
    return e;
  }
  if (lookup(get, "OMPI_COMM_WORLD_RANK") && lookup(get, "OMPI_COMM_WORLD_SIZE")) {
    e.source = "openmpi";
    const std::string why = "set by mpirun";
    e.rank = required_int(get, "OMPI_COMM_WORLD_RANK", why);
    e.world_size = required_int(get, "OMPI_COMM_WORLD_SIZE", why);
    e.local_rank = required_int(get, "OMPI_COMM_WORLD_LOCAL_RANK", why);
    e.local_world_size = required_int(get, "OMPI_COMM_WORLD_LOCAL_SIZE", why);
    e.node_rank = e.local_world_size > 0 ? e.rank / e.local_world_size : 0;
    const bool one_node = e.world_size <= e.local_world_size;
    choose_master(e, get, job, one_node ? std::optional<std::string>("127.0.0.1") : std::nullopt,
                  "the default", 29500, "the default");
    if (e.master_addr_from == "the default" && !one_node)
      throw std::runtime_error(
          "Open MPI environment: the ranks span several nodes but MASTER_ADDR is not set (pass "
          "it with mpirun -x MASTER_ADDR=<rank 0's host>, or set dist.master_addr in the job)");
    check(e, "Open MPI environment");
    std::string jobid = "?";
    for (const char* name :
         {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"})
      if (auto v = lookup(get, name)) {
        jobid = *v;
        break;
      }
    choose_job_id(e, get, "mpirun job " + jobid);
    return e;
  }
  if (lookup(get, "SLURM_PROCID") && lookup(get, "SLURM_STEP_NUM_TASKS")) {
    e.source = "slurm";
    const std::string why = "set by srun";
    e.rank = required_int(get, "SLURM_PROCID", why);
    e.world_size = required_int(get, "SLURM_STEP_NUM_TASKS", why);
    e.local_rank = int_var(get, "SLURM_LOCALID").value_or(0);
    e.node_rank = int_var(get, "SLURM_NODEID").value_or(0);
    if (auto per_node = lookup(get, "SLURM_STEP_TASKS_PER_NODE")) {
      auto counts = expand_tasks_per_node("SLURM_STEP_TASKS_PER_NODE", *per_node);
      if (e.node_rank >= 0 && static_cast<size_t>(e.node_rank) < counts.size())
        e.local_world_size = counts[static_cast<size_t>(e.node_rank)];
    } else if (auto n = int_var(get, "SLURM_NTASKS_PER_NODE")) {
      e.local_world_size = *n;
    } else {
      e.local_world_size = e.world_size;
    }
    // The defaults srun's variables give: the first host of the step, and a
    // port from the job id.
    std::optional<std::string> node_host;
    std::string node_from = "SLURM_STEP_NODELIST";
    auto nodes = lookup(get, "SLURM_STEP_NODELIST");
    if (!nodes) {
      nodes = lookup(get, "SLURM_JOB_NODELIST");
      node_from = "SLURM_JOB_NODELIST";
    }
    if (nodes) node_host = first_slurm_host(*nodes);
    int port = 29500;
    std::string port_from = "the default";
    const auto job_id = lookup(get, "SLURM_JOB_ID");
    if (job_id) {
      port = 15000 + static_cast<int>(std::strtoul(job_id->c_str(), nullptr, 10) % 10000);
      port_from = "SLURM_JOB_ID";
    }
    choose_master(e, get, job, node_host, node_from, port, port_from);
    if (e.master_addr_from == "the default")
      throw std::runtime_error(
          "SLURM environment: neither MASTER_ADDR nor SLURM_STEP_NODELIST/SLURM_JOB_NODELIST "
          "is set (nor dist.master_addr in the job)");
    check(e, "SLURM environment");
    choose_job_id(e, get,
                  "SLURM job " + job_id.value_or("?") + " step " +
                      lookup(get, "SLURM_STEP_ID").value_or("?"));
    return e;
  }
  return e;
}

}  // namespace

DistEnv read_dist_env(const EnvLookup& get, const JobRendezvousKeys& job) {
  DistEnv e = read_launch_source(get, job);
  for (const char* name : {"TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT"}) {
    if (auto n = int_var(get, name)) {
      if (*n < 0)
        throw std::runtime_error(std::string(name) + "=" + std::to_string(*n) +
                                 ": expected 0 or more");
      e.job_restart = *n;
      e.job_restart_from = name;
      break;
    }
  }
  if (auto base = int_var(get, "RH_ELASTIC_BASE_WORLD_SIZE")) {
    if (*base < 1)
      throw std::runtime_error("RH_ELASTIC_BASE_WORLD_SIZE=" + std::to_string(*base) +
                               " (set by runner-host's elastic launcher): expected 1 or more");
    e.elastic_base_world_size = *base;
  }
  if (auto at = lookup(get, "RH_ELASTIC_DETECTED_AT")) {
    char* end = nullptr;
    const double v = std::strtod(at->c_str(), &end);
    if (end == at->c_str() || *end != '\0' || !(v >= 0))
      throw std::runtime_error("RH_ELASTIC_DETECTED_AT='" + *at +
                               "' (set by runner-host's elastic launcher): expected seconds "
                               "since the epoch");
    e.elastic_detected_at = v;
  }
  return e;
}

double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

DistEnv dist_env_from_environment(const JobRendezvousKeys& job) {
  return read_dist_env([](const char* name) { return std::getenv(name); }, job);
}

bool is_launched_worker() {
  const char* v = std::getenv("RH_LAUNCHED");
  return v != nullptr && std::string(v) == "1";
}

int default_intra_op_threads() {
  auto get = [](const char* name) -> const char* { return std::getenv(name); };
  try {
    if (auto omp = int_var(get, "OMP_NUM_THREADS"); omp && *omp > 0) return *omp;
  } catch (const std::runtime_error&) {
    // not a plain integer (e.g. "4,2" nested settings): ignore it here
  }
  int local_world_size = 1;
  try {
    const DistEnv env = dist_env_from_environment();
    if (env.source == "slurm")
      if (auto cpus = int_var(get, "SLURM_CPUS_PER_TASK"); cpus && *cpus > 0) return *cpus;
    local_world_size = std::max(1, env.local_world_size);
  } catch (const std::runtime_error&) {
    local_world_size = 1;
  }
  return std::max(1, available_cores() / local_world_size);
}

void configure_rank_logging(int rank) {
  if (rank == 0) return;
  const char* all = std::getenv("RH_LOG_ALL_RANKS");
  if (all != nullptr && std::string(all) == "1") return;
  // spdlog::set_level also sets the level of the loggers made later; the
  // loggers already quieter than warn are put back where they were.
  std::vector<std::pair<std::shared_ptr<spdlog::logger>, spdlog::level::level_enum>> quieter;
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& logger) {
    if (logger->level() > spdlog::level::warn) quieter.emplace_back(logger, logger->level());
  });
  spdlog::set_level(spdlog::level::warn);
  for (auto& [logger, level] : quieter) logger->set_level(level);
}

}  // namespace rh::launch
