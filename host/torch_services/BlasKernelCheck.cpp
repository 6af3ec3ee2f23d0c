#include "torch_services/BlasKernelCheck.hpp"

#include <strings.h>
#include <unistd.h>  // environ (g++ defines _GNU_SOURCE)

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "config/Suggest.hpp"

namespace rh::host {
namespace {

bool same_core(const std::string& a, const std::string& b) {
  return !a.empty() && ::strcasecmp(a.c_str(), b.c_str()) == 0;
}

std::string times(double factor) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fx", factor);
  return text;
}

// "OpenBLAS 0.3.21" (or "OpenBLAS" when its config names no version).
std::string openblas_name(const std::string& config) {
  const std::string version = openblas_version(config);
  return version.empty() ? "OpenBLAS" : "OpenBLAS " + version;
}

constexpr const char* kMeasured =
    "measured on this machine, one thread; results checked against float64";

// Why a probe of `core` does not count, or "" when it does: it failed, ran
// other kernels than asked (OpenBLAS does not know the name, or will not run
// it on this CPU), or computed a product outside the float64 bound.
std::string rejection(const BlasProbeResult& r, const std::string& core) {
  if (!r.error.empty()) return r.error;
  if (!same_core(r.core, core))
    return "with OPENBLAS_CORETYPE=" + core + " it ran its " +
           (r.core.empty() ? std::string("unnamed") : r.core) + " kernels";
  if (!r.ok)
    return "its " + core + " kernels computed a float32 product off by " +
           times(r.max_error_ratio) + " its float64 error bound";
  return "";
}

// The environment's probe against the first better core that checks out.
struct Comparison {
  BlasProbeResult base;            // the environment as it is
  std::string core;                // the better core that checked out; "" when none
  BlasProbeResult with;            // its probe
  double factor = 0;               // base.ms / with.ms
  std::vector<std::string> notes;  // why the others did not count
};

Comparison compare(const std::string& library, const std::vector<std::string>& cores,
                   const ProbeFn& probe) {
  Comparison c;
  c.base = probe({library, std::nullopt, false});
  if (!c.base.error.empty()) return c;
  for (const std::string& core : cores) {
    BlasProbeResult r = probe({library, core, false});
    const std::string why = rejection(r, core);
    if (!why.empty()) {
      c.notes.push_back(core + ": " + why);
      continue;
    }
    c.core = core;
    c.with = r;
    c.factor = r.ms > 0 ? c.base.ms / r.ms : 0;
    break;
  }
  return c;
}

std::string joined(const std::vector<std::string>& notes) {
  std::string text;
  for (const std::string& n : notes) text += (text.empty() ? "" : "; ") + n;
  return text;
}

}  // namespace

BlasEnv blas_env_from_environment() {
  BlasEnv env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("OPENBLAS_", 0) != 0) continue;
    env.openblas_vars.push_back(entry);
    const std::string value = entry.substr(entry.find('=') + 1);
    if (entry.rfind("OPENBLAS_CORETYPE=", 0) == 0) env.coretype = value;
    if (entry.rfind("OPENBLAS_L2_SIZE=", 0) == 0) env.l2_size = value;
  }
  std::sort(env.openblas_vars.begin(), env.openblas_vars.end());
  return env;
}

BlasVerdict check_blas_kernel(const LoadedBlas& loaded, const BlasEnv& env, const CpuFeatures& cpu,
                              const ProbeFn& probe) {
  using Level = BlasVerdict::Level;
  if (loaded.path.empty()) return {Level::Debug, "BLAS: none loaded"};
  if (loaded.core.empty())
    return {Level::Debug, "BLAS: " + loaded.path + " (not OpenBLAS: no kernel choice to check)"};
  const std::string blas = openblas_name(loaded.config) + ", " + loaded.path;
  const std::string runs = "BLAS: " + blas + ", running its " + loaded.core + " kernels";
  if (env.coretype || env.l2_size)
    return {Level::Debug,
            runs + "; the environment's choice stands (" +
                (env.coretype ? "OPENBLAS_CORETYPE=" + *env.coretype : std::string()) +
                (env.coretype && env.l2_size ? ", " : "") +
                (env.l2_size ? "OPENBLAS_L2_SIZE=" + *env.l2_size : std::string()) +
                "; nothing probed)"};
  const SimdTier have = core_tier(loaded.core), can = cpu_tier(cpu);
  if (have == SimdTier::Unknown || can == SimdTier::Unknown)
    return {Level::Debug, runs + " (cannot rank them against this CPU)"};
  const std::vector<std::string> better = better_cores(have, cpu);
  if (better.empty())
    return {Level::Debug, runs + ", the best for this CPU (" + tier_name(can) + ")"};

  const Comparison c = compare(loaded.path, better, probe);
  if (!c.base.error.empty()) return {Level::Debug, runs + "; the probe failed: " + c.base.error};
  if (!c.base.ok)
    return {Level::Warn,
            "LibTorch's BLAS (" + blas + ") computes wrong float32 matrix products with its " +
                loaded.core + " kernels on this CPU: an element is off by " +
                times(c.base.max_error_ratio) + " its float64 error bound. Set OPENBLAS_CORETYPE" +
                (c.core.empty() ? std::string(" to a core whose products check out")
                                : "=" + c.core + " (its products check out)")};
  if (c.core.empty())
    return {Level::Debug, runs + "; no better core checked out (" + joined(c.notes) + ")"};
  if (c.factor < kWorthwhileSpeedup)
    return {Level::Debug, runs + "; its " + c.core + " kernels are not faster here (" +
                              times(c.factor) + ", " + kMeasured + ")"};
  return {Level::Warn,
          "LibTorch's BLAS (" + blas + ") runs its " + loaded.core + " kernels on this CPU (" +
              tier_name(can) + "): a float32 matrix product takes " + times(c.factor) +
              " as long as with its " + c.core + " kernels (" + kMeasured +
              "). Set OPENBLAS_CORETYPE=" + c.core + ", or env_cfg.blas_coretype: auto in the job"};
}

CoretypeChoice choose_blas_coretype(const std::string& wanted, const BlasEnv& env,
                                    const CpuFeatures& cpu, const ProbeFn& probe) {
  CoretypeChoice choice;
  const bool automatic = wanted == "auto";
  auto refuse = [&choice](std::string message) {
    choice.refused = true;
    choice.message = std::move(message);
    return choice;
  };
  auto leave = [&choice](std::string message) {
    choice.message = std::move(message) + ": OPENBLAS_CORETYPE left unset";
    return choice;
  };
  if (env.coretype) {
    choice.message = "OPENBLAS_CORETYPE=" + *env.coretype +
                     " is set in the environment and stands (it is never overridden); nothing "
                     "probed";
    return choice;
  }
  if (automatic && env.l2_size)
    return leave("OPENBLAS_L2_SIZE=" + *env.l2_size +
                 " is set in the environment: OpenBLAS is tuned by hand on this machine, and "
                 "auto leaves it alone (name a core to choose one anyway)");

  // Which BLAS LibTorch will load, and the core OpenBLAS picks there.
  const BlasProbeResult found = probe({kBlasSoname, std::nullopt, true});
  if (!found.error.empty()) {
    if (automatic) return leave("cannot probe LibTorch's BLAS: " + found.error);
    return refuse("cannot check the core '" + wanted + "': " + found.error);
  }
  if (found.core.empty()) {
    const std::string not_openblas = "LibTorch's BLAS (" + found.library + ") is not OpenBLAS";
    if (automatic) return leave(not_openblas + ", which has no kernels to choose");
    return refuse(not_openblas +
                  ": OPENBLAS_CORETYPE would change nothing. Remove the key, or install "
                  "OpenBLAS (apt-get install libopenblas0-pthread)");
  }
  const std::string name = openblas_name(found.config);

  if (automatic) {
    const SimdTier have = core_tier(found.core), can = cpu_tier(cpu);
    if (have == SimdTier::Unknown || can == SimdTier::Unknown)
      return leave(name + " runs its " + found.core + " kernels, which cannot be ranked against " +
                   "this CPU");
    const std::vector<std::string> better = better_cores(have, cpu);
    if (better.empty())
      return leave(name + " already runs its " + found.core + " kernels, the best for this CPU (" +
                   tier_name(can) + ")");
    const Comparison c = compare(found.library, better, probe);
    const std::string runs =
        name + " runs its " + found.core + " kernels on this CPU (" + tier_name(can) + ")";
    if (!c.base.error.empty()) return leave(runs + "; the probe failed: " + c.base.error);
    if (c.core.empty())
      return leave(runs + "; no better core checked out (" + joined(c.notes) + ")");
    if (c.factor < kWorthwhileSpeedup)
      return leave(runs + "; its " + c.core + " kernels are not faster here (" + times(c.factor) +
                   ", " + kMeasured + ")");
    choice.coretype = c.core;
    choice.message = "OPENBLAS_CORETYPE=" + c.core + ": " + runs +
                     ", where a float32 matrix product takes " + times(c.factor) +
                     " as long as with its " + c.core + " kernels (" + kMeasured + ")";
    return choice;
  }

  // A named core: OpenBLAS must run it, and its products must check out.
  const BlasProbeResult r = probe({found.library, wanted, false});
  if (!r.error.empty())
    return refuse("cannot run " + name + "'s '" + wanted + "' kernels here: " + r.error +
                  "; name a core this CPU runs, or write auto");
  if (!same_core(r.core, wanted)) {
    std::string message = name + " does not know the core '" + wanted +
                          "' or will not run it on this CPU: with OPENBLAS_CORETYPE=" + wanted +
                          " it ran its " + (r.core.empty() ? std::string("unnamed") : r.core) +
                          " kernels";
    const std::string close = config::suggest(wanted, known_cores());
    if (!close.empty() && !same_core(close, wanted)) message += " (did you mean '" + close + "'?)";
    const std::string best = core_for_tier(cpu_tier(cpu), cpu);
    return refuse(message + "; name a core this CPU runs" +
                  (best.empty() ? std::string() : " (" + best + " here)") + ", or write auto");
  }
  if (!r.ok)
    return refuse(name + "'s " + r.core +
                  " kernels compute wrong float32 matrix products on this CPU: an element is off "
                  "by " +
                  times(r.max_error_ratio) +
                  " its float64 error bound; leave the key out, or write auto");
  choice.coretype = wanted;
  choice.message = "OPENBLAS_CORETYPE=" + wanted + ": " + name + " runs its " + r.core + " kernels";
  // Its own choice, for comparison only: a named core is the job's choice.
  const BlasProbeResult base = probe({found.library, std::nullopt, false});
  if (base.error.empty() && base.ms > 0 && r.ms > 0 && !same_core(base.core, r.core)) {
    const double factor = base.ms / r.ms;
    choice.message += factor >= 1 ? "; its own choice here, its " + base.core + " kernels, takes " +
                                        times(factor) + " as long for a float32 matrix product"
                                  : ", which take " + times(1 / factor) +
                                        " as long for a float32 matrix product as its own "
                                        "choice here, its " +
                                        base.core + " kernels";
    choice.message += std::string(" (") + kMeasured + ")";
  } else {
    choice.message += " (results checked against float64)";
  }
  return choice;
}

}  // namespace rh::host
