// The interop tests read runner-host's files with Python's torch:
// /usr/bin/python3 with Debian's python3-torch, which tools/install-deps.sh
// installs. Where it is missing, tools/install-deps.sh --missing-is-failure
// decides whether that fails the test (under CI, or when dpkg says the
// package is installed but torch does not import) or skips it (a developer
// machine that has not installed it yet), and says why.
#pragma once

#include <optional>
#include <string>

#include "common/TestUtil.hpp"

namespace rh::test {

struct MissingPythonTorch {
  std::string reason;
  bool fails = false;  // a failure, not a skip
};

// Empty when /usr/bin/python3 imports torch.
inline std::optional<MissingPythonTorch> missing_python_torch(const std::string& install_deps) {
  if (run_command("/usr/bin/python3 -c 'import torch'").exit_code == 0) return std::nullopt;
  const CommandResult verdict =
      run_command(quote(install_deps) + " --missing-is-failure python3-torch");
  std::string why = verdict.output;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return MissingPythonTorch{"/usr/bin/python3 cannot import torch: " + why, verdict.exit_code == 0};
}

}  // namespace rh::test

// In a TEST body: fails or skips the test (as above) when /usr/bin/python3
// cannot import torch. `install_deps`: the path of tools/install-deps.sh.
#define RH_REQUIRE_PYTHON_TORCH(install_deps)                                      \
  do {                                                                             \
    if (const auto rh_missing_ = ::rh::test::missing_python_torch(install_deps)) { \
      if (rh_missing_->fails) FAIL() << rh_missing_->reason;                       \
      GTEST_SKIP() << rh_missing_->reason;                                         \
    }                                                                              \
  } while (0)
