#include "launch/WorkerEnv.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
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

DistEnv read_dist_env(const EnvLookup& get) {
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
    e.master_addr = lookup(get, "MASTER_ADDR").value_or("127.0.0.1");
    e.master_port = int_var(get, "MASTER_PORT").value_or(29500);
    check(e, "RANK/WORLD_SIZE environment");
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
    auto addr = lookup(get, "MASTER_ADDR");
    if (!addr && e.world_size > e.local_world_size)
      throw std::runtime_error(
          "Open MPI environment: the ranks span several nodes but MASTER_ADDR is not set (pass "
          "it with mpirun -x MASTER_ADDR=<rank 0's host>)");
    e.master_addr = addr.value_or("127.0.0.1");
    e.master_port = int_var(get, "MASTER_PORT").value_or(29500);
    check(e, "Open MPI environment");
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
    if (auto addr = lookup(get, "MASTER_ADDR")) {
      e.master_addr = *addr;
    } else {
      auto nodes = lookup(get, "SLURM_STEP_NODELIST");
      if (!nodes) nodes = lookup(get, "SLURM_JOB_NODELIST");
      if (!nodes)
        throw std::runtime_error(
            "SLURM environment: neither MASTER_ADDR nor SLURM_STEP_NODELIST/SLURM_JOB_NODELIST "
            "is set");
      e.master_addr = first_slurm_host(*nodes);
    }
    if (auto port = int_var(get, "MASTER_PORT")) {
      e.master_port = *port;
    } else if (auto job = lookup(get, "SLURM_JOB_ID")) {
      e.master_port = 15000 + static_cast<int>(std::strtoul(job->c_str(), nullptr, 10) % 10000);
    }
    check(e, "SLURM environment");
    return e;
  }
  return e;
}

DistEnv dist_env_from_environment() {
  return read_dist_env([](const char* name) { return std::getenv(name); });
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
