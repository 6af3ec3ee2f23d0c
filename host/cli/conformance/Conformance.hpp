// `runner-host conformance`: runs a third-party strategy plugin through the
// checks our own strategies pass (Checks.hpp lists them). Lives on the
// launcher side of the program: no LibTorch here; every job is a run of
// the program itself.
#pragma once

#include <string>
#include <vector>

namespace rh::cli::conformance {

// The words after `conformance`. Prints one line per check to stdout;
// returns 0 when every check run passed, 1 when one failed, 2 on bad usage.
int run_conformance(const std::vector<std::string>& args);

}  // namespace rh::cli::conformance
