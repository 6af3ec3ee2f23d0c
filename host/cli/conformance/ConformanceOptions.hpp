// The command line of `runner-host conformance` (Boost.Program_options, as
// the program's own).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace rh::cli::conformance {

// The command line of `runner-host conformance`.
struct ConformanceOptions {
  std::filesystem::path strategy;  // --strategy: the .so under test (absolute)
  std::string type;                // --type: its strategy type; empty: its only one
  std::filesystem::path config;    // --config: the strategy's own keys (a YAML map)
  std::vector<int> ranks;          // --ranks; empty: each check's default
  std::string only;                // --only CHECK; empty: every check
  std::filesystem::path keep;      // --keep DIR; empty: a temporary directory
  std::string expect_divergence;   // --expect-divergence REASON (a lossy strategy)
  double tolerance = 1e-5;         // --tolerance: equivalence's max relative difference
  bool help = false;
};

// Parses the words after `conformance`; throws std::runtime_error with a
// one-line reason on bad usage.
ConformanceOptions parse_conformance_options(const std::vector<std::string>& args);
std::string conformance_help();

}  // namespace rh::cli::conformance
