// Before the built-in launcher starts its workers (runner-host
// --nproc-per-node N ...): what every worker checks before it creates
// anything — the job whole, the rules between keys and --mode, the loaders'
// pipelines, the plugins created and what the job asks of them, i.e. what
// --dry-run runs — checked once, in one child process of this program, so
// that a job that cannot run is exit 2 with one message and no rank
// launched. A child, because those checks load LibTorch and the plugins,
// and the launcher process stays free of both while its workers train
// (RunnerEntry.hpp). It costs one such start-up (about a second) per launch.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rh::cli {

struct LaunchCheck {
  int exit_code = 0;   // the child's: 0 valid, 2 invalid (another: the workers will say)
  std::string errors;  // what it wrote to stderr
};

// Runs `self` with `args` (argv[1..] of the launch) less the launcher's
// flags and any --log-level, plus --dry-run --log-level error.
LaunchCheck check_before_launch(const std::filesystem::path& self,
                                const std::vector<std::string>& args);

}  // namespace rh::cli
