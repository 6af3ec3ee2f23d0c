// The conformance checks, in the order they run. Each is one function in a
// file of its own (HandshakeCheck.cpp, ...): what it runs, what it compares
// and why a strategy must pass it are written there for plugin authors.
#pragma once

#include <string>
#include <vector>

#include "cli/conformance/Check.hpp"

namespace rh::cli::conformance {

CheckResult check_handshake(CheckContext& ctx);
CheckResult check_lifecycle(CheckContext& ctx);
CheckResult check_equivalence(CheckContext& ctx);
CheckResult check_exact_resume(CheckContext& ctx);
CheckResult check_checkpoints(CheckContext& ctx);
CheckResult check_bad_config(CheckContext& ctx);
CheckResult check_faults(CheckContext& ctx);
CheckResult check_tensor_parallel(CheckContext& ctx);

struct CheckEntry {
  const char* name;
  CheckResult (*run)(CheckContext&);
  const char* summary;  // for --help
};

// Every check, in order.
const std::vector<CheckEntry>& all_checks();

}  // namespace rh::cli::conformance
