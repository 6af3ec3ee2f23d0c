// The runner-host command line (Boost.Program_options).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launch/LaunchFlags.hpp"

namespace rh::cli {

struct CliOptions {
  std::string config;                     // --config
  std::vector<std::string> set_args;      // --set key.path=value (in order)
  std::vector<std::string> plugin_paths;  // --plugin-path (in order)
  bool list_plugins = false;
  bool print_config = false;
  bool print_param_groups = false;  // --print-param-groups
  bool dry_run = false;
  bool estimate_memory = false;          // --estimate-memory (with --nproc-per-node, --nnodes)
  std::string mode = "train";            // --mode train|val|test
  std::optional<std::string> log_level;  // --log-level overrides the job's
  bool version = false;
  bool help = false;
  // The built-in launcher's flags (launch/LaunchFlags.hpp): more than one
  // process per node or more than one node re-executes runner-host once per
  // local rank.
  launch::LauncherFlags launch;

  // The job is only printed (--print-config, --print-param-groups).
  bool prints_job() const { return print_config || print_param_groups; }
  // The job runs, or is checked as if it did (--dry-run): not only printed
  // nor estimated. The rules between keys and --mode apply to it.
  bool runs_job() const { return !prints_job() && !estimate_memory; }
};

// Parses argv; throws std::runtime_error with a one-line reason on bad usage.
CliOptions parse_cli(int argc, const char* const* argv);
std::string cli_help();

}  // namespace rh::cli
