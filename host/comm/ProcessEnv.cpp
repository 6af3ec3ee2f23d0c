// process_env_from_environment: where this process sits in a multi-process
// run, from the variables torchrun, Open MPI or SLURM set.
#include <cerrno>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "comm/Communicator.hpp"

namespace rh::comm {
namespace {

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

[[noreturn]] void malformed(const char* name, const std::string& value, const std::string& why,
                            const std::string& source) {
  throw std::runtime_error("environment variable " + std::string(name) + "='" + value + "' " + why +
                           " (read as " + source + "'s launch environment)");
}

int parse_int(const char* name, const char* text, const std::string& source, long lo, long hi) {
  std::string value(text);
  size_t begin = value.find_first_not_of(" \t");
  size_t end = value.find_last_not_of(" \t");
  std::string trimmed = begin == std::string::npos ? "" : value.substr(begin, end - begin + 1);
  if (trimmed.empty()) malformed(name, value, "is not an integer", source);
  errno = 0;
  char* stop = nullptr;
  long v = std::strtol(trimmed.c_str(), &stop, 10);
  if (stop == nullptr || *stop != '\0' || errno == ERANGE)
    malformed(name, value, "is not an integer", source);
  if (v < lo || v > hi)
    malformed(name, value,
              "is out of range (expected " + std::to_string(lo) + ".." + std::to_string(hi) + ")",
              source);
  return static_cast<int>(v);
}

constexpr long kMaxRanks = 1L << 24;

int required(const char* name, const std::string& source, const char* because, long lo, long hi) {
  const char* v = get(name);
  if (v == nullptr)
    throw std::runtime_error("environment variable " + std::string(name) + " is not set but " +
                             because + " is (incomplete " + source + " launch environment)");
  return parse_int(name, v, source, lo, hi);
}

// SLURM_TASKS_PER_NODE, e.g. "2(x3),1": the count of node `node`.
std::optional<int> slurm_tasks_on_node(const char* text, int node) {
  std::string s(text);
  size_t pos = 0;
  int index = 0;
  while (pos < s.size()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int count = 0, repeat = 1;
    size_t paren = item.find("(x");
    try {
      count = std::stoi(item.substr(0, paren));
      if (paren != std::string::npos) repeat = std::stoi(item.substr(paren + 2));
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (node < index + repeat) return count;
    index += repeat;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::nullopt;
}

void fill_master(ProcessEnv& env) {
  const char* addr = get("MASTER_ADDR");
  if (addr != nullptr) {
    env.master_addr = addr;
  } else if (env.local_world_size < env.world_size) {
    throw std::runtime_error(
        "environment variable MASTER_ADDR is not set but the " + std::to_string(env.world_size) +
        " ranks span several nodes (" + std::to_string(env.local_world_size) +
        " per node, read from " + env.source +
        "'s launch environment): export MASTER_ADDR=<host of rank 0> and MASTER_PORT");
  } else {
    env.master_addr = "127.0.0.1";
  }
  const char* port = get("MASTER_PORT");
  env.master_port = port ? parse_int("MASTER_PORT", port, env.source, 1, 65535) : 29500;
}

void check_consistent(const ProcessEnv& env, const char* rank_var, const char* size_var,
                      const char* local_rank_var, const char* local_size_var) {
  if (env.rank >= env.world_size)
    throw std::runtime_error(std::string(rank_var) + "=" + std::to_string(env.rank) +
                             " is not below " + size_var + "=" + std::to_string(env.world_size) +
                             " (" + env.source + " launch environment)");
  if (env.local_rank >= env.local_world_size)
    throw std::runtime_error(std::string(local_rank_var) + "=" + std::to_string(env.local_rank) +
                             " is not below " + local_size_var + "=" +
                             std::to_string(env.local_world_size) + " (" + env.source +
                             " launch environment)");
  if (env.local_world_size > env.world_size)
    throw std::runtime_error(std::string(local_size_var) + "=" +
                             std::to_string(env.local_world_size) + " is above " + size_var + "=" +
                             std::to_string(env.world_size) + " (" + env.source +
                             " launch environment)");
}

}  // namespace

std::optional<ProcessEnv> process_env_from_environment() {
  ProcessEnv env{};
  if (get("RANK") || get("WORLD_SIZE")) {
    env.source = "torchrun";
    const char* any = get("RANK") ? "RANK" : "WORLD_SIZE";
    env.rank = required("RANK", env.source, any, 0, kMaxRanks - 1);
    env.world_size = required("WORLD_SIZE", env.source, any, 1, kMaxRanks);
    // A hand-made launch may give only RANK and WORLD_SIZE: one node.
    const char* lr = get("LOCAL_RANK");
    const char* lws = get("LOCAL_WORLD_SIZE");
    env.local_rank = lr ? parse_int("LOCAL_RANK", lr, env.source, 0, kMaxRanks - 1) : env.rank;
    env.local_world_size =
        lws ? parse_int("LOCAL_WORLD_SIZE", lws, env.source, 1, kMaxRanks) : env.world_size;
    check_consistent(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE");
  } else if (get("OMPI_COMM_WORLD_RANK") || get("OMPI_COMM_WORLD_SIZE")) {
    env.source = "openmpi";
    const char* any = get("OMPI_COMM_WORLD_RANK") ? "OMPI_COMM_WORLD_RANK" : "OMPI_COMM_WORLD_SIZE";
    env.rank = required("OMPI_COMM_WORLD_RANK", env.source, any, 0, kMaxRanks - 1);
    env.world_size = required("OMPI_COMM_WORLD_SIZE", env.source, any, 1, kMaxRanks);
    env.local_rank = required("OMPI_COMM_WORLD_LOCAL_RANK", env.source, any, 0, kMaxRanks - 1);
    env.local_world_size = required("OMPI_COMM_WORLD_LOCAL_SIZE", env.source, any, 1, kMaxRanks);
    check_consistent(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
  } else if (get("SLURM_PROCID")) {
    env.source = "slurm";
    env.rank = parse_int("SLURM_PROCID", get("SLURM_PROCID"), env.source, 0, kMaxRanks - 1);
    env.world_size = required("SLURM_NTASKS", env.source, "SLURM_PROCID", 1, kMaxRanks);
    env.local_rank = required("SLURM_LOCALID", env.source, "SLURM_PROCID", 0, kMaxRanks - 1);
    if (const char* per_node = get("SLURM_NTASKS_PER_NODE")) {
      env.local_world_size = parse_int("SLURM_NTASKS_PER_NODE", per_node, env.source, 1, kMaxRanks);
    } else if (const char* tasks = get("SLURM_TASKS_PER_NODE")) {
      const char* node_text = get("SLURM_NODEID");
      int node = node_text ? parse_int("SLURM_NODEID", node_text, env.source, 0, kMaxRanks) : 0;
      auto n = slurm_tasks_on_node(tasks, node);
      if (!n || *n < 1)
        malformed("SLURM_TASKS_PER_NODE", tasks, "is not like '2(x3),1'", env.source);
      env.local_world_size = *n;
    } else {
      env.local_world_size = env.world_size;
    }
    // srun may place fewer tasks on the last node than --ntasks-per-node says.
    if (env.local_world_size > env.world_size) env.local_world_size = env.world_size;
    check_consistent(env, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE");
  } else {
    return std::nullopt;
  }
  fill_master(env);
  return env;
}

}  // namespace rh::comm
