// The runner-host command line (Boost.Program_options).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rh::cli {

struct CliOptions {
  std::string config;                     // --config
  std::vector<std::string> set_args;      // --set key.path=value (in order)
  std::vector<std::string> plugin_paths;  // --plugin-path (in order)
  bool list_plugins = false;
  bool print_config = false;
  bool print_param_groups = false;  // --print-param-groups
  bool dry_run = false;
  bool estimate_memory = false;  // --estimate-memory (with --nproc-per-node, --nnodes)
  std::string mode = "train";            // --mode train|val|test
  std::optional<std::string> log_level;  // --log-level overrides the job's
  bool version = false;
  bool help = false;
  // The built-in launcher (host/launch): more than one process per node or
  // more than one node re-executes runner-host once per local rank.
  int nproc_per_node = 1;  // --nproc-per-node
  int nnodes = 1;          // --nnodes
  int node_rank = 0;       // --node-rank
  int max_restarts = 0;    // --max-restarts
  int min_nodes = 0;       // --min-nodes (0: --nnodes)
  // --master-addr and --master-port (0: pick a free port); unset when not
  // given: then MASTER_ADDR/MASTER_PORT, the job's dist.master_addr /
  // dist.master_port, or the default (launch::launch_options) apply.
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
};

// Parses argv; throws std::runtime_error with a one-line reason on bad usage.
CliOptions parse_cli(int argc, const char* const* argv);
std::string cli_help();

}  // namespace rh::cli
