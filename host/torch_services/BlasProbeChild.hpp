// Running the BLAS probe (BlasProbe.hpp) in a child process: the program
// again (`<exe> --blas-probe LIBRARY`), with OPENBLAS_NUM_THREADS=1 and,
// when a kernel is asked for, OPENBLAS_CORETYPE. A child because OpenBLAS
// chooses its kernels once, when it is loaded: this process's OpenBLAS (the
// runner library's), or the one main.cpp has not loaded yet, must not be
// the one that reads the choice. Measured here: 0.01 s for --core-only,
// 0.03-0.05 s for a timed probe on OpenBLAS 0.3.21's Prescott kernels.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "torch_services/BlasProbe.hpp"

namespace rh::host {

struct ProbeRequest {
  std::string library;                  // a path, or a soname the dynamic linker resolves
  std::optional<std::string> coretype;  // OPENBLAS_CORETYPE for the child; none: the environment's
  bool core_only = false;               // name the core and the file; time nothing
};

// How the checks run a probe (a child process, a cache in front of it, or a
// test's fake). Never throws: a failure is the result's `error`.
using ProbeFn = std::function<BlasProbeResult(const ProbeRequest&)>;

// Runs `exe --blas-probe ...` and reads its line; a child that exits
// without one, is killed by a signal (SIGILL: the CPU lacks the kernel's
// instructions) or runs past `timeout_s` is an error naming it.
BlasProbeResult probe_in_child(const std::filesystem::path& exe, const ProbeRequest& request,
                               double timeout_s = 30);

// probe_in_child with `exe`, as a ProbeFn.
ProbeFn child_prober(const std::filesystem::path& exe);

}  // namespace rh::host
