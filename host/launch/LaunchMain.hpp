// The launcher as the runner-host program runs it: `runner-host
// --nproc-per-node N ...` re-executes itself once per local rank with the same
// arguments less the launcher flags (see Launcher.hpp for what happens then).
#pragma once

#include <string>
#include <vector>

#include "launch/Launcher.hpp"

namespace rh::launch {

// The options that belong to the launcher; each takes a value.
const std::vector<std::string>& launcher_flags();

// `args` (argv[1..]) less the launcher flags, in both forms: `--flag VALUE`
// and `--flag=VALUE`; an unambiguous prefix of one of them (`--nproc 2`, as
// Boost.Program_options accepts) too. Everything after a bare `--` is kept.
std::vector<std::string> strip_launcher_flags(const std::vector<std::string>& args);

// Runs the workers: /proc/self/exe with argv[1..] less the launcher flags, one
// per local rank, and returns the program's exit code (the launcher's, see
// launch()). Bad launcher options print `runner-host: error: ...` to stderr and
// return 2; so does a launch from inside a launched worker (RH_LAUNCHED=1),
// which would otherwise start workers without end.
int run_launcher(const LaunchOptions& options, int argc, const char* const* argv);

}  // namespace rh::launch
