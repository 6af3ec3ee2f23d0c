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
  bool dry_run = false;
  std::string mode = "train";            // --mode train|val|test
  std::optional<std::string> log_level;  // --log-level overrides the job's
  bool version = false;
  bool help = false;
  // The built-in launcher (host/launch): more than one process per node or
  // more than one node re-executes runner-host once per local rank.
  int nproc_per_node = 1;                 // --nproc-per-node
  int nnodes = 1;                         // --nnodes
  int node_rank = 0;                      // --node-rank
  std::string master_addr = "127.0.0.1";  // --master-addr
  int master_port = 29500;                // --master-port (0: pick a free port)
};

// Parses argv; throws std::runtime_error with a one-line reason on bad usage.
CliOptions parse_cli(int argc, const char* const* argv);
std::string cli_help();

}  // namespace rh::cli
