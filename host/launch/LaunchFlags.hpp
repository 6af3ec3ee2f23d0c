// The built-in launcher's command-line flags (runner-host --nproc-per-node N
// ...): the struct they fill, the one table of their names, values and help
// that the command line (cli/CliOptions.cpp), --help and
// strip_launcher_flags read, and the one check of their values that the
// command line and launch() both run.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace rh::launch {

// The job's shape as the launcher flags give it: the flags and the
// launcher's options (LaunchOptions, Launcher.hpp) are both one of these,
// so it is never copied field by field.
struct LaunchShape {
  int nproc_per_node = 1;  // --nproc-per-node
  int nnodes = 1;          // --nnodes
  int node_rank = 0;       // --node-rank
  int max_restarts = 0;    // --max-restarts
  int min_nodes = 0;       // --min-nodes (0: --nnodes)
};

// What the command line says about the launch; master_addr and master_port
// are unset when their flag was not given (then MASTER_ADDR/MASTER_PORT,
// the job's dist keys or the defaults apply: launch_options()).
struct LauncherFlags : LaunchShape {
  std::optional<std::string> master_addr;  // --master-addr
  std::optional<int> master_port;          // --master-port (0: a free one)

  // Whether the program launches workers rather than training itself.
  bool launches() const { return nproc_per_node > 1 || nnodes > 1 || max_restarts > 0; }
};

// One flag: its name without "--", the name of its value in --help, its
// help text, and the field of LauncherFlags it fills (by its type: an int,
// an int that may be unset, a string that may be unset).
struct LauncherFlagSpec {
  const char* name;
  const char* value_name;
  const char* help;
  std::variant<int& (*)(LauncherFlags&), std::optional<int>& (*)(LauncherFlags&),
               std::optional<std::string>& (*)(LauncherFlags&)>
      field;
};
const std::vector<LauncherFlagSpec>& launcher_flag_specs();

// The values the flags must have, between themselves: throws
// std::invalid_argument naming the flag ("--nnodes: expected 1 or more, got
// 0"). check_launch_shape checks the shape; check_master the rendezvous
// address and port (unset: not checked) on `nnodes` nodes, `port_from`
// naming where the port came from when it is not the flag (launch() checks
// its resolved options: "MASTER_PORT", "dist.master_port at job.yaml:9:30").
// check_launcher_flags is both, on the command line's flags.
void check_launch_shape(const LaunchShape& shape);
void check_master(const std::optional<std::string>& addr, const std::optional<int>& port,
                  int nnodes, const std::string& port_from);
void check_launcher_flags(const LauncherFlags& flags);

}  // namespace rh::launch
