#include "cli/BlasCoretype.hpp"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "launch/WorkerEnv.hpp"
#include "torch_services/BlasKernelCheck.hpp"
#include "torch_services/BlasProbeCache.hpp"

namespace rh::cli {
namespace {

// Said at info: by a process the built-in launcher did not start (it said
// it for its workers), on the first rank of its node, unless the log level
// asks for warnings and errors only. The runner library sets the level
// itself later; this line comes before it is loaded.
bool says_it(const config::Node& job, const std::optional<std::string>& log_level_flag) {
  std::string level = log_level_flag.value_or("");
  if (level.empty())
    if (const config::Node* l = job.find("log_level"); l != nullptr && !l->is_null())
      level = l->as_string();
  if (level == "warn" || level == "error") return false;
  if (launch::is_launched_worker()) return false;
  try {
    return launch::dist_env_from_environment().local_rank == 0;
  } catch (const std::exception&) {
    return true;  // the runner reports a bad environment itself
  }
}

}  // namespace

std::string apply_blas_coretype(const config::Node& job,
                                const std::optional<std::string>& log_level_flag,
                                const std::filesystem::path& exe) {
  const config::Node* env_cfg = job.find("env_cfg");
  const config::Node* key = env_cfg != nullptr ? env_cfg->find("blas_coretype") : nullptr;
  if (key == nullptr || key->is_null()) return "";
  const std::string wanted = key->as_string();

  const host::BlasEnv env = host::blas_env_from_environment();
  host::ProbeFn probe = host::child_prober(exe);
  if (auto dir = host::default_probe_cache_dir())
    probe = host::cached_prober(std::move(probe), *dir, host::cpu_model_name(), env.openblas_vars);
  const host::CoretypeChoice choice =
      host::choose_blas_coretype(wanted, env, host::detect_cpu_features(), probe);
  if (choice.refused)
    return config::ConfigError(key->location(), key->path(), choice.message).what();
  if (choice.coretype) ::setenv("OPENBLAS_CORETYPE", choice.coretype->c_str(), 1);
  spdlog::log(says_it(job, log_level_flag) ? spdlog::level::info : spdlog::level::debug,
              "env_cfg.blas_coretype {}: {}", wanted, choice.message);
  return "";
}

}  // namespace rh::cli
