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
};

// Parses argv; throws std::runtime_error with a one-line reason on bad usage.
CliOptions parse_cli(int argc, const char* const* argv);
std::string cli_help();

}  // namespace rh::cli
