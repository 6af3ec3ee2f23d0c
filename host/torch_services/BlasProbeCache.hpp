// BLAS probe results kept between runs. On a machine whose OpenBLAS runs
// older kernels than its CPU could, every runner-host process would pay two
// timed probes at start-up: `runner-host --dry-run` of the quickstart took
// 0.15-0.5 s longer without this cache (2 cores shared with builds), no
// measurable time with it; the thousands of processes a test run starts
// would pay many minutes.
// A timed probe's result is kept, one small file per key, in
// $XDG_CACHE_HOME/runner-host/blas-probe/ (else ~/.cache/runner-host/...),
// never in the job's work_dir. The key: the library file (resolved path,
// size and modification time: an upgraded OpenBLAS is a new file), the CPU
// (/proc/cpuinfo's name, family and model), every OPENBLAS_* variable the
// child sees, the probe's shape and this format's version; a file whose key
// differs is not used. A folder that cannot be made or written is skipped:
// the probe runs again, nothing fails. Core-only probes (0.01 s) and failed
// ones are not kept.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "torch_services/BlasProbeChild.hpp"

namespace rh::host {

// $XDG_CACHE_HOME/runner-host/blas-probe, else $HOME/.cache/runner-host/
// blas-probe; nullopt when neither variable is set.
std::optional<std::filesystem::path> default_probe_cache_dir();

// The key of a timed request; "" when its library is not a file here (a
// soname: not kept). `openblas_vars` are OPENBLAS_*=value entries of this
// process's environment (BlasEnv::openblas_vars).
std::string probe_cache_key(const ProbeRequest& request, const std::string& cpu_model,
                            const std::vector<std::string>& openblas_vars);

// `inner` behind the cache in `dir`.
ProbeFn cached_prober(ProbeFn inner, std::filesystem::path dir, std::string cpu_model,
                      std::vector<std::string> openblas_vars);

}  // namespace rh::host
