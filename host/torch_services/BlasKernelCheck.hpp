// Whether OpenBLAS runs the kernels this CPU can: the warning at start-up
// (the runner library) and the choice env_cfg.blas_coretype makes (main.cpp,
// before the runner library, hence OpenBLAS, is loaded, and before the
// launcher starts workers, which inherit it). Both rank OpenBLAS's core
// against the CPU (BlasKernel.hpp), and only when it is of a lower tier
// measure: the probe (BlasProbe.hpp) with the environment as it is against
// the probe with a better core, each product checked against float64.
//
// The environment's OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are never
// overridden, nor probed against: on some CPUs they are set because an
// older OpenBLAS computes wrong results or crashes with its own choice.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "torch_services/BlasCheck.hpp"
#include "torch_services/BlasKernel.hpp"
#include "torch_services/BlasProbeChild.hpp"

namespace rh::host {

// What the environment says to OpenBLAS.
struct BlasEnv {
  std::optional<std::string> coretype;     // OPENBLAS_CORETYPE
  std::optional<std::string> l2_size;      // OPENBLAS_L2_SIZE
  std::vector<std::string> openblas_vars;  // every OPENBLAS_*=value, sorted (the cache's key)
};
BlasEnv blas_env_from_environment();

// A kernel faster by less than this earns neither a warning nor a choice:
// the factor measured here varied from 4.7x to 6.1x between runs on 2 busy
// cores, and a gain of less than a fifth is within such noise.
inline constexpr double kWorthwhileSpeedup = 1.2;

// What the start-up check found, and at which level to say it.
struct BlasVerdict {
  enum class Level { Debug, Warn };
  Level level = Level::Debug;
  std::string message;
};

// The start-up check: `loaded` is the BLAS this process runs on. Probes
// (through `probe`) only when OpenBLAS's core is of a lower tier than the
// CPU's and the environment sets neither variable above; warns when a
// better core checked out against float64 and is kWorthwhileSpeedup faster.
BlasVerdict check_blas_kernel(const LoadedBlas& loaded, const BlasEnv& env, const CpuFeatures& cpu,
                              const ProbeFn& probe);

// The soname LibTorch links, resolved by the probe's child as the dynamic
// linker resolves it for LibTorch (main.cpp has no BLAS loaded to ask).
inline constexpr const char* kBlasSoname = "libblas.so.3";

// env_cfg.blas_coretype's decision.
struct CoretypeChoice {
  std::optional<std::string> coretype;  // export OPENBLAS_CORETYPE=this; none: leave it
  std::string message;                  // what was chosen and why; or why it is refused
  bool refused = false;                 // a named core that did not check out (exit 2)
};

// `wanted`: "auto" or an OpenBLAS core name. auto picks a better core as
// the start-up check would (only when OpenBLAS's own is of a lower tier,
// and only when the environment sets neither variable: OPENBLAS_L2_SIZE
// says OpenBLAS is tuned by hand on this machine, and auto leaves such a
// machine alone). A named core is chosen when OpenBLAS runs it and its
// products check out against float64 (OPENBLAS_L2_SIZE, if set, stays and
// is probed with it), else refused; OPENBLAS_CORETYPE set in the
// environment wins over either.
CoretypeChoice choose_blas_coretype(const std::string& wanted, const BlasEnv& env,
                                    const CpuFeatures& cpu, const ProbeFn& probe);

}  // namespace rh::host
