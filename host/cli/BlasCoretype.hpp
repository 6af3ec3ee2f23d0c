// env_cfg.blas_coretype (docs/config-keys.md): the OpenBLAS kernels of this
// process and of the workers its launcher starts, chosen by the program
// (main.cpp) before the runner library loads LibTorch, and OpenBLAS with it:
// OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded, and the workers
// inherit the environment. The choice itself is BlasKernelCheck.hpp's.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "config/ConfigNode.hpp"

namespace rh::cli {

// Applies the job's env_cfg.blas_coretype, if it has one: sets
// OPENBLAS_CORETYPE or leaves it, and logs what and why at info: once per
// node (the launcher's workers leave it to their launcher), and not under
// a log level of warn or error (`log_level_flag`, else the job's
// log_level). `exe` is this program, run as the probe's child. Returns ""
// or the refusal of a named core, as a job error: "job.yaml:L:C:
// env_cfg.blas_coretype: ...".
std::string apply_blas_coretype(const config::Node& job,
                                const std::optional<std::string>& log_level_flag,
                                const std::filesystem::path& exe);

}  // namespace rh::cli
