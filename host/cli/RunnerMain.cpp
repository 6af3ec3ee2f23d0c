// runner-host's work past the launcher (librh_runner.so, loaded by main.cpp):
// load the job, load the plugins, check everything, then run.
// `runner-host ckpt ...` is the checkpoint tool (cli/CkptTool.hpp).
//
// Exit codes: 0 success; 2 the job or a plugin is invalid (reported before
// anything is created, written or launched); 1 the run itself failed.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "abi/ComponentFactory.hpp"
#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginRegistry.hpp"
#include "abi/SearchPath.hpp"
#include "cli/CkptTool.hpp"
#include "cli/CliOptions.hpp"
#include "cli/PluginListing.hpp"
#include "cli/RunnerEntry.hpp"
#include "config/ConfigNode.hpp"
#include "config/JobLoader.hpp"
#include "config/Schema.hpp"
#include "data/Dataset.hpp"
#include "job/JobSchema.hpp"
#include "job/JobSettings.hpp"
#include "launch/LaunchGate.hpp"
#include "launch/StopSignal.hpp"
#include "launch/WorkerEnv.hpp"
#include "lifecycle/JobComponents.hpp"
#include "lifecycle/MemoryEstimate.hpp"
#include "lifecycle/OptimizerParams.hpp"
#include "lifecycle/Runner.hpp"
#include "lifecycle/TensorMemory.hpp"
#include "torch_services/BlasCheck.hpp"
#include "torch_services/BlasKernelCheck.hpp"
#include "torch_services/BlasProbeCache.hpp"
#include "torch_services/TorchServices.hpp"

namespace fs = std::filesystem;
using namespace rh;

namespace {

constexpr int kExitRunFailed = 1;
constexpr int kExitInvalid = 2;

int fail(int code, const std::string& message) {
  std::cerr << "runner-host: error: " << message << "\n";
  return code;
}

bool set_log_level(const std::string& level) {
  static const std::vector<std::string> kLevels = {"trace", "debug", "info", "warn", "error"};
  if (std::find(kLevels.begin(), kLevels.end(), level) == kLevels.end()) return false;
  spdlog::set_level(spdlog::level::from_str(level == "warn" ? "warning" : level));
  return true;
}

// Plugin components the job may leave out (--print-config shows them).
void apply_defaults(config::Node& root) {
  const config::Location where{"(default)"};
  for (const auto& [key, type] :
       {std::pair<const char*, const char*>{"strategy", "single"},
        std::pair<const char*, const char*>{"checkpoint_io", "safetensors"}}) {
    if (root.find(key) != nullptr) continue;
    auto spec = config::Node::make_map(where);
    spec->set("type", config::Node::make_scalar(type, false, where), where);
    root.set(key, spec, where);
  }
  root.assign_paths();
}

// The BLAS LibTorch runs on: the reference BLAS (about 8x slower), or
// OpenBLAS on older kernels than the CPU can run (BlasKernelCheck.hpp). The
// BLAS is the node's: the first rank of each node checks it (and probes,
// when it must); the others say which kernels they run (debug).
void check_blas() {
  const host::LoadedBlas blas = host::loaded_blas();
  if (host::is_reference_blas(blas.path)) {
    spdlog::warn(
        "LibTorch runs on the reference BLAS ({}): matrix products are about 8x slower. "
        "Install OpenBLAS: apt-get install libopenblas0-pthread",
        blas.path);
    return;
  }
  bool first_on_node = true;
  try {
    first_on_node = launch::dist_env_from_environment().local_rank == 0;
  } catch (const std::exception&) {
    // the runner reports a bad environment itself, later
  }
  if (!first_on_node) {
    if (!blas.core.empty()) spdlog::debug("BLAS: {}, running its {} kernels", blas.path, blas.core);
    return;
  }
  const host::BlasEnv env = host::blas_env_from_environment();
  std::error_code ec;
  host::ProbeFn probe = host::child_prober(fs::read_symlink("/proc/self/exe", ec));
  if (auto dir = host::default_probe_cache_dir())
    probe = host::cached_prober(std::move(probe), *dir, host::cpu_model_name(), env.openblas_vars);
  const host::BlasVerdict verdict =
      host::check_blas_kernel(blas, env, host::detect_cpu_features(), probe);
  spdlog::log(
      verdict.level == host::BlasVerdict::Level::Warn ? spdlog::level::warn : spdlog::level::debug,
      "{}", verdict.message);
}

std::string default_work_dir(const config::Node& root, const std::string& config_path) {
  if (const config::Node* w = root.find("work_dir")) return fs::absolute(w->as_string()).string();
  return fs::absolute(fs::path("work_dirs") / fs::path(config_path).stem()).string();
}

}  // namespace

int rh_runner_main(int argc, char** argv, const char* heap_policy) {
  // The checkpoint tool: `runner-host ckpt inspect|consolidate|convert ...`.
  if (argc >= 2 && std::string(argv[1]) == "ckpt") {
    host::HostServices services;
    host::install_torch_services(services);
    host::PluginRegistry registry(host::host_native_tag(), services);
    std::error_code ec;
    return cli::run_ckpt_tool(std::vector<std::string>(argv + 2, argv + argc),
                              fs::read_symlink("/proc/self/exe", ec), registry, services);
  }

  // The launch gate (launch/LaunchGate.hpp): under the built-in launcher,
  // local rank 0 makes the checks of steps 0 and 1 first and tells the
  // launcher, which prints a refusal once; the other ranks wait here until
  // it passed (or end with 2, without a word, when it did not).
  launch::WorkerGate gate = launch::WorkerGate::from_env();
  if (!gate.wait_until_open()) return kExitInvalid;
  const auto refuse = [&](const std::string& text) {
    if (gate.role() == launch::WorkerGate::Role::Check)
      gate.refuse(text);
    else
      std::cerr << text;
    return kExitInvalid;
  };
  const auto invalid = [&](const std::string& message) {
    return refuse("runner-host: error: " + message + "\n");
  };

  cli::CliOptions opts;
  try {
    opts = cli::parse_cli(argc, argv);
  } catch (const std::exception& e) {
    return invalid(std::string(e.what()) + " (see runner-host --help)");
  }
  // --help and the launcher are main.cpp's (they never load this library).
  const host::NativeTag tag = host::host_native_tag();
  if (opts.version) {
    std::cout << "runner-host " << RH_VERSION << " (ABI " << RH_ABI_VERSION_MAJOR << "."
              << RH_ABI_VERSION_MINOR << ", native tag " << tag.str() << ")\n";
    return 0;
  }
  if (opts.log_level && !set_log_level(*opts.log_level))
    return invalid("--log-level: expected trace, debug, info, warn or error, got '" +
                   *opts.log_level + "'");

  host::HostServices services;
  host::install_torch_services(services);
  // Before the model or anything large: the memory/* metrics count the CPU
  // tensors made from here on (lifecycle/TensorMemory.hpp).
  if (!lifecycle::count_cpu_tensor_memory())
    spdlog::debug("process: CPU tensors not counted (LibTorch's CPU allocator was replaced)");
  check_blas();
  if (heap_policy != nullptr && *heap_policy != '\0') spdlog::debug("process: {}", heap_policy);

  // Relative --plugin-path / RH_PLUGIN_PATH entries are relative to the job
  // file's directory (as `plugin:` paths are); without a job file they are
  // refused rather than read against the current directory.
  std::optional<fs::path> job_dir;
  if (!opts.config.empty()) job_dir = fs::absolute(opts.config).lexically_normal().parent_path();
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  std::vector<host::SearchDir> search_dirs;
  try {
    search_dirs =
        host::plugin_search_dirs(opts.plugin_paths, std::getenv("RH_PLUGIN_PATH"), exe, job_dir);
  } catch (const host::HostError& e) {
    return invalid(e.what());
  }
  host::PluginRegistry registry(tag, services);
  if (opts.list_plugins) {
    // Only here is every library opened (its constructors run): a job opens
    // just the ones its components need.
    registry.scan(search_dirs);
    std::cout << cli::list_plugins(registry);
    return 0;
  }
  registry.set_search_path(search_dirs);

  // Step 0: the whole job is read and validated before anything is created.
  config::Job job;
  try {
    job = config::load_job(opts.config, opts.set_args);
    apply_defaults(*job.root);
    auto errors = config::validate_job(*job.root);
    // The rules between keys and --mode (train needs train_cfg, val and
    // test their split), for a job that runs (--dry-run too), not one only
    // printed or estimated; main.cpp asks the same before it launches ranks.
    if (errors.empty() && opts.runs_job())
      errors = config::check_run(*job.root, config::run_mode(opts.mode));
    if (!errors.empty()) {
      std::string text;
      for (const auto& e : errors) text += "runner-host: error: " + std::string(e.what()) + "\n";
      return refuse(text);
    }
    // The loaders' rules the schema cannot say (an image pipeline's order
    // and the values it does not implement, keys that exclude each other),
    // without reading a data file: before launch, and by --dry-run.
    data::check_loaders(*job.root);
  } catch (const config::ConfigError& e) {
    return invalid(e.what());
  }
  if (opts.print_config) {
    std::cout << config::to_yaml(*job.root);
    return 0;
  }
  if (opts.print_param_groups) {
    try {
      lifecycle::print_param_groups(*job.root, *job_dir, std::cout);
    } catch (const config::ConfigError& e) {
      return invalid(e.what());
    } catch (const std::exception& e) {
      return fail(kExitRunFailed, e.what());
    }
    return 0;
  }
  if (!opts.log_level)
    if (const config::Node* level = job.root->find("log_level")) set_log_level(level->as_string());

  // Step 1: create the job's plugin components; each validates its subtree.
  host::ComponentFactory factory(registry, services, *job_dir,
                                 default_work_dir(*job.root, opts.config));
  lifecycle::JobComponents components;
  try {
    factory.load_explicit_plugins(*job.root);
    components = lifecycle::create_components(factory, *job.root);
    // The job's ranks: what the environment says (the built-in launcher,
    // torchrun, srun, mpirun), else what the flags ask for
    // (--estimate-memory), else this process.
    int world_size = opts.launch.nproc_per_node * opts.launch.nnodes;
    try {
      const int from_env = launch::dist_env_from_environment().world_size;
      if (from_env > 1) world_size = from_env;
    } catch (const std::exception&) {
      // A launch environment that does not add up is said at step 2.
    }
    lifecycle::check_model(*job.root, job_dir->string(), *components.strategy, world_size);
  } catch (const std::exception& e) {
    return invalid(e.what());
  }
  gate.pass();  // steps 0 and 1 passed: the other ranks go on
  if (opts.estimate_memory) {
    const lifecycle::MemoryEstimateOptions o{opts.launch.nproc_per_node * opts.launch.nnodes,
                                             opts.launch.nproc_per_node};
    try {
      lifecycle::print_memory_estimate(
          lifecycle::estimate_memory(*job.root, *job_dir, *components.strategy, o), o, std::cout);
    } catch (const std::exception& e) {
      return fail(kExitInvalid, e.what());  // nothing ran: the job or the strategy refused it
    }
    return 0;
  }
  if (opts.dry_run) {
    spdlog::info("dry run: the job is valid; strategy {}, {} hook(s), checkpoint_io {}",
                 components.strategy->type(), components.hooks.size(),
                 components.checkpoint_io->type());
    return 0;
  }

  // Steps 2-13: the lifecycle.
  lifecycle::RunnerOptions run_opts;
  run_opts.mode = opts.mode == "val"    ? lifecycle::RunMode::Val
                  : opts.mode == "test" ? lifecycle::RunMode::Test
                                        : lifecycle::RunMode::Train;
  run_opts.job_dir = *job_dir;
  run_opts.work_dir = default_work_dir(*job.root, opts.config);
  run_opts.config_yaml = config::to_yaml(*job.root);
  run_opts.runner_version = RH_VERSION;
  // Preemption (SIGTERM, SIGUSR1): stop at the next iteration boundary,
  // checkpointed, rather than die mid-step.
  launch::install_stop_signal_handlers();
  try {
    lifecycle::Runner runner(*job.root, run_opts, services, std::move(components));
    runner.run();
  } catch (const lifecycle::StopRequested& e) {
    spdlog::warn("{}", e.what());
    return 128 + e.signal();
  } catch (const config::ConfigError& e) {
    return fail(kExitInvalid, e.what());
  } catch (const std::exception& e) {
    return fail(kExitRunFailed, e.what());
  }
  return 0;
}
