// What every conformance check gets and gives back.
//
// A check is one function (one per file beside this one) that runs real
// jobs through the runner-host program and compares what they left with
// what the shipped strategies leave. A third-party author reads that one
// function to see what is expected of a strategy.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "cli/conformance/ConformanceOptions.hpp"
#include "cli/conformance/JobRunner.hpp"
#include "cli/conformance/PluginProbe.hpp"

namespace rh::cli::conformance {

enum class Outcome { Pass, Fail, Skip };

// One line of the report: `PASS|FAIL|SKIP <check>: <detail>`; the detail
// says what was measured and the figure.
struct CheckResult {
  Outcome outcome = Outcome::Pass;
  std::string detail;
};

inline CheckResult pass(std::string detail) { return {Outcome::Pass, std::move(detail)}; }
inline CheckResult fail(std::string detail) { return {Outcome::Fail, std::move(detail)}; }
inline CheckResult skip(std::string detail) { return {Outcome::Skip, std::move(detail)}; }

struct CheckContext {
  const ConformanceOptions& options;
  std::filesystem::path program;  // the runner-host executable the jobs run
  const PluginProbe& probe;       // what the registry made of the library
  // The strategy under test as the value of `strategy:` (type, plugin and
  // the --config keys), one YAML flow map; and the same with one key no
  // strategy has (`no_such_key`), for bad_config.
  std::string strategy_yaml;
  std::string strategy_yaml_unknown_key;
  JobRunner& jobs;
  // Set by handshake: the strategy refused a world of 2 ranks in SetupEnv
  // (it runs one process, as `single`), so the checks run on 1 rank.
  bool one_process = false;

  // --ranks when given, else 1 for a one-process strategy, else `fallback`.
  std::vector<int> ranks_or(std::vector<int> fallback) const {
    if (!options.ranks.empty()) return options.ranks;
    return one_process ? std::vector<int>{1} : fallback;
  }
};

}  // namespace rh::cli::conformance
