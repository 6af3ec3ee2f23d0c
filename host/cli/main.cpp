// runner-host: the program. It parses the command line, answers --help,
// applies the job's env_cfg (before anything loads OpenBLAS), runs the
// built-in launcher (--nproc-per-node / --nnodes), `runner-host
// conformance` (which only runs this program again) and the BLAS probe
// (--blas-probe, hidden) itself, and hands everything else (a job,
// --version, --list-plugins, `ckpt ...`) to the runner library, which it
// loads only then (cli/RunnerEntry.hpp says why: this file and what it
// links are free of LibTorch, so the launcher starts in milliseconds and
// holds a few MB while its workers train).
//
// Exit codes: 0 success; 2 the job, a plugin or the command line is invalid
// (reported before anything is created, written or launched), or the
// runner library cannot be loaded; 1 the run itself failed.
#include <dlfcn.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/BlasCoretype.hpp"
#include "cli/CliOptions.hpp"
#include "cli/RunnerEntry.hpp"
#include "cli/conformance/Conformance.hpp"
#include "cli/parity/Parity.hpp"
#include "config/JobLoader.hpp"
#include "job/JobSchema.hpp"
#include "job/JobSettings.hpp"
#include "launch/HeapPolicy.hpp"
#include "launch/LaunchGate.hpp"
#include "launch/LaunchMain.hpp"
#include "launch/ThreadPolicy.hpp"
#include "torch_services/BlasProbe.hpp"

namespace fs = std::filesystem;

namespace {

constexpr int kExitInvalid = 2;

// This program (the BLAS probe's child runs it again).
fs::path self() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec);
}

// The runner library of this installation: <prefix>/bin/runner-host loads
// <prefix>/<libdir>/runner-host/librh_runner.so (the build tree has the same
// layout).
fs::path runner_library() { return self().parent_path().parent_path() / RH_RUNNER_LIBRARY_RELPATH; }

// The job as the program sees it, before the runner library. nothing when
// it has no job or the job cannot be read or fails the schema (the runner,
// or each worker, reports that, with the plugins' and loaders' own checks).
// `refusal`: the rules between keys and --mode (config::check_run) it breaks,
// which the program reports itself before it launches a rank.
std::optional<rh::config::Job> valid_job(const rh::cli::CliOptions& opts,
                                         std::vector<rh::config::ConfigError>& refusal) {
  if (opts.config.empty()) return std::nullopt;
  try {
    rh::config::Job job = rh::config::load_job(opts.config, opts.set_args);
    if (!rh::config::validate_job(*job.root).empty()) return std::nullopt;
    refusal = rh::config::check_run(*job.root, rh::config::run_mode(opts.mode));
    return job;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The job's dist.master_addr, dist.master_port and dist.timeout_s, for the
// launcher (the workers read the same job).
rh::launch::JobRendezvousKeys job_rendezvous_keys(const std::optional<rh::config::Job>& job) {
  rh::launch::JobRendezvousKeys keys;
  if (!job) return keys;
  const rh::config::DistCfg dist = rh::config::read_settings(*job->root).dist;
  keys.master_addr = dist.master_addr;
  if (dist.master_addr) keys.master_addr_at = dist.master_addr_at.str();
  keys.master_port = dist.master_port;
  if (dist.master_port) keys.master_port_at = dist.master_port_at.str();
  keys.timeout_s = dist.timeout_s;
  return keys;
}

// Opens the runner library (once; it stays loaded until exit). nullptr with
// `error` set when it cannot be loaded.
void* open_runner_library(std::string& error) {
  // RTLD_LOCAL: the library's own symbols stay out of the global scope, where
  // they could interpose on a plugin's; it exports only its entry points.
  // RTLD_LAZY: LibTorch's functions are bound at their first call, as when
  // the program linked LibTorch itself (binding them all at once made
  // `--version` take 1.21 s instead of 0.75-0.92 s).
  const fs::path library = runner_library();
  void* handle = ::dlopen(library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (handle == nullptr) error = ::dlerror();
  return handle;
}

// The elastic launcher's rendezvous (--max-restarts), from the runner
// library: it needs c10d's store, so only an elastic launcher loads LibTorch.
std::unique_ptr<rh::launch::ElasticAgent> elastic_agent(const rh::launch::ElasticAgentOptions& o) {
  std::string error;
  void* handle = open_runner_library(error);
  if (handle == nullptr)
    throw std::runtime_error("cannot load the runner library for the elastic rendezvous: " + error);
  auto make = reinterpret_cast<rh_ElasticAgentFn>(::dlsym(handle, RH_ELASTIC_AGENT_SYMBOL));
  if (make == nullptr)
    throw std::runtime_error(runner_library().string() + " has no " RH_ELASTIC_AGENT_SYMBOL
                                                         " (reinstall runner-host)");
  char why[1024] = "";
  rh::launch::ElasticAgent* agent = make(&o, why, sizeof why);
  if (agent == nullptr) throw std::runtime_error(why);
  return std::unique_ptr<rh::launch::ElasticAgent>(agent);
}

// A runner library that cannot be used: exit 2 with `message`. A worker of
// the built-in launcher says it through the launch gate (LaunchGate.hpp):
// local rank 0 as its refusal, printed once by the launcher; another rank
// only when rank 0 passed (its install works: the problem is this rank's),
// else it ends without a word.
int broken_install(const std::string& message) {
  const std::string text = "runner-host: error: " + message + "\n";
  rh::launch::WorkerGate gate = rh::launch::WorkerGate::from_env();
  if (gate.role() == rh::launch::WorkerGate::Role::Check) {
    gate.refuse(text);
    return kExitInvalid;
  }
  if (!gate.wait_until_open()) return kExitInvalid;
  std::cerr << text;
  return kExitInvalid;
}

}  // namespace

int main(int argc, char** argv) {
  // `runner-host --blas-probe LIBRARY [--core-only]` (hidden; docs/build.md,
  // "The BLAS check"): the child the BLAS checks time a kernel in.
  if (argc >= 2 && std::string(argv[1]) == "--blas-probe")
    return rh::host::blas_probe_main(argc - 2, argv + 2);

  spdlog::set_default_logger(spdlog::stderr_color_mt("runner-host"));
  spdlog::set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");

  // `runner-host conformance ...`: its jobs are runs of this program, so it
  // needs neither LibTorch nor the runner library.
  if (argc >= 2 && std::string(argv[1]) == "conformance")
    return rh::cli::conformance::run_conformance(std::vector<std::string>(argv + 2, argv + argc));
  // `runner-host parity ...`: two runs of this program, compared step by step.
  if (argc >= 2 && std::string(argv[1]) == "parity")
    return rh::cli::parity::run_parity(std::vector<std::string>(argv + 2, argv + argc));

  // `runner-host ckpt ...` has its own command line (the library parses it).
  const bool ckpt = argc >= 2 && std::string(argv[1]) == "ckpt";
  rh::launch::HeapMode heap = rh::launch::HeapMode::kRelease;  // env_cfg.heap
  if (!ckpt) {
    rh::cli::CliOptions opts;
    try {
      opts = rh::cli::parse_cli(argc, argv);
    } catch (const std::exception& e) {
      std::cerr << "runner-host: error: " << e.what() << " (see runner-host --help)\n";
      return kExitInvalid;
    }
    if (opts.help) {
      std::cout << rh::cli::cli_help();
      return 0;
    }
    std::vector<rh::config::ConfigError> refusal;
    const std::optional<rh::config::Job> job = valid_job(opts, refusal);
    // A job that cannot run in this mode (train without train_cfg, val
    // without data.val): exit 2 before a rank is launched or a file made.
    // Not for a job only printed or estimated.
    if (!refusal.empty() && opts.runs_job()) {
      for (const auto& e : refusal) std::cerr << "runner-host: error: " << e.what() << "\n";
      return kExitInvalid;
    }
    if (job)
      if (const rh::config::Node* env_cfg = job->root->find("env_cfg"))
        if (const rh::config::Node* key = env_cfg->find("heap"); key && !key->is_null())
          heap = rh::launch::heap_mode(key->as_string());
    // The job's env_cfg, before anything loads OpenBLAS (the runner library)
    // or starts a worker (which inherits it); not for a job only printed.
    if (job && opts.runs_job()) {
      const std::string refused = rh::cli::apply_blas_coretype(*job->root, opts.log_level, self());
      if (!refused.empty()) {
        std::cerr << "runner-host: error: " << refused << "\n";
        return kExitInvalid;
      }
    }
    // The built-in launcher: one worker per local rank, each this program again.
    // Its rendezvous: the flags, else MASTER_ADDR/MASTER_PORT, else the
    // job's dist.master_addr/dist.master_port, else (one node) a free port.
    // --estimate-memory reads the world size from the same flags and
    // launches nothing.
    if (!opts.estimate_memory && opts.launch.launches()) {
      // What each worker would refuse before creating anything (--dry-run's
      // checks, plugins included) is checked once, by local rank 0, while
      // the others wait at their start (launch/LaunchGate.hpp): a refusal is
      // one message and exit 2, nothing created on any rank. Not for a job
      // only printed.
      const bool gate = !opts.config.empty() && !opts.prints_job();
      return rh::launch::run_launcher(opts.launch, job_rendezvous_keys(job), argc, argv,
                                      elastic_agent, gate);
    }
  }

  // OpenMP's waiting (launch/ThreadPolicy.hpp says why), before the runner
  // library loads LibTorch and libgomp, which read it once; after env_cfg,
  // which may choose the OpenBLAS kernel this loads.
  const std::string thread_policy = ckpt ? "" : rh::launch::apply_thread_policy();
  std::string error;
  void* handle = open_runner_library(error);
  if (handle == nullptr)
    return broken_install("cannot load the runner library (reinstall runner-host): " + error);
  auto run = reinterpret_cast<rh_RunnerMainFn>(::dlsym(handle, RH_RUNNER_MAIN_SYMBOL));
  if (run == nullptr)
    return broken_install(runner_library().string() +
                          " is not runner-host's runner library (no " RH_RUNNER_MAIN_SYMBOL
                          "; reinstall runner-host)");
  // The heap policy (launch/HeapPolicy.hpp says why) comes after LibTorch's
  // static initialisation, as when the program linked LibTorch, and before
  // anything large is allocated. Applied before the dlopen instead, it sent
  // LibTorch's start-up allocations to the heap too, and the quickstart's
  // iterations took 1.5-1.9% longer (median of 12 alternating runs each, two
  // series): the training tensors then live in a heap laid out otherwise.
  const std::string heap_policy = rh::launch::apply_heap_policy(heap);
  std::string policies = heap_policy.empty() ? "" : "heap: " + heap_policy;
  if (!thread_policy.empty())
    policies += (policies.empty() ? "" : "; ") + ("threads: " + thread_policy);
  // The library stays loaded until exit: its static objects, threads and
  // the plugins it opened live as long as the process.
  return run(argc, argv, policies.c_str());
}
