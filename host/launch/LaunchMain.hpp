// The launcher as the runner-host program runs it: `runner-host
// --nproc-per-node N ...` re-executes itself once per local rank with the same
// arguments less the launcher flags (see Launcher.hpp for what happens then).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launch/LaunchFlags.hpp"
#include "launch/Launcher.hpp"
#include "launch/WorkerEnv.hpp"

namespace rh::launch {

// The launcher's options. The master address and the port each come from,
// first found: the flag (--master-addr, --master-port), the launcher's
// environment (MASTER_ADDR, MASTER_PORT), the job (dist.master_addr,
// dist.master_port: `job`); else 127.0.0.1, and for the port, on one node 0
// (launch() picks a free port, as `torchrun --standalone` does: two jobs on
// one machine never share one), on several 29500 (torchrun's default: every
// node must arrive at the same port). master_addr_from / master_port_from
// say which. Throws std::invalid_argument for a MASTER_PORT that is no port.
LaunchOptions launch_options(const LauncherFlags& flags, const EnvLookup& get,
                             const JobRendezvousKeys& job);

// The options that belong to the launcher (launcher_flag_specs' names); each
// takes a value.
const std::vector<std::string>& launcher_flags();

// `args` (argv[1..]) less the launcher flags, in both forms: `--flag VALUE`
// and `--flag=VALUE`; an unambiguous prefix of one of them (`--nproc 2`, as
// Boost.Program_options accepts) too. Everything after a bare `--` is kept.
std::vector<std::string> strip_launcher_flags(const std::vector<std::string>& args);

// Runs the workers: /proc/self/exe with argv[1..] less the launcher flags, one
// per local rank, with the options launch_options() makes of `flags`, this
// process's environment and `job`, and returns the program's exit code (the
// launcher's, see launch()). Bad launcher options (a port that is taken
// included) print `runner-host: error: ...` to stderr and return 2; so does a
// launch from inside a launched worker (RH_LAUNCHED=1), which would otherwise
// start workers without end.
// `agents`: the elastic rendezvous, for --max-restarts; `gate`: the launch
// gate (LaunchGate.hpp: local rank 0 checks the job before the others go on).
int run_launcher(const LauncherFlags& flags, const JobRendezvousKeys& job, int argc,
                 const char* const* argv, const ElasticAgentFactory& agents = {},
                 bool gate = false);

}  // namespace rh::launch
