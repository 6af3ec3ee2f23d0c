#include "launch/LaunchMain.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

#include "launch/WorkerEnv.hpp"

namespace rh::launch {
namespace {

constexpr int kExitInvalid = 2;
constexpr int kExitRunFailed = 1;

// The launcher flag `name` stands for: itself or the only flag it is a prefix
// of; "" when none.
std::string match_flag(const std::string& name) {
  if (name.empty()) return "";
  std::string found;
  for (const auto& flag : launcher_flags()) {
    if (flag == name) return flag;
    if (flag.compare(0, name.size(), name) == 0) {
      if (!found.empty()) return "";  // ambiguous: not ours to strip
      found = flag;
    }
  }
  return found;
}

std::string self_exe() {
  std::string path(4096, '\0');
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size());
  if (n <= 0 || static_cast<size_t>(n) >= path.size()) return "/proc/self/exe";
  path.resize(static_cast<size_t>(n));
  return path;
}

}  // namespace

const std::vector<std::string>& launcher_flags() {
  static const std::vector<std::string> kFlags = [] {
    std::vector<std::string> names;
    for (const LauncherFlagSpec& spec : launcher_flag_specs()) names.emplace_back(spec.name);
    return names;
  }();
  return kFlags;
}

std::vector<std::string> strip_launcher_flags(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      const size_t eq = a.find('=');
      const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
      if (!match_flag(name).empty()) {
        if (eq == std::string::npos) ++i;  // its value is the next argument
        continue;
      }
    }
    out.push_back(a);
  }
  return out;
}

LaunchOptions launch_options(const LauncherFlags& flags, const EnvLookup& get,
                             const JobRendezvousKeys& job) {
  LaunchOptions o;
  static_cast<LaunchShape&>(o) = flags;  // the shape as the flags give it
  if (job.timeout_s) o.elastic_timeout_s = *job.timeout_s;
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) == 0) o.host = host;
  auto env = [&](const char* name) -> std::optional<std::string> {
    const char* v = get(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
  if (flags.master_addr) {
    o.master_addr = *flags.master_addr;
    o.master_addr_from = "--master-addr";
  } else if (auto addr = env("MASTER_ADDR")) {
    o.master_addr = *addr;
    o.master_addr_from = "MASTER_ADDR";
  } else if (job.master_addr && !job.master_addr->empty()) {
    o.master_addr = *job.master_addr;
    o.master_addr_from = job_key_label("dist.master_addr", job.master_addr_at);
  } else {
    o.master_addr = "127.0.0.1";
    o.master_addr_from = "the default";
  }
  if (flags.master_port) {
    o.master_port = *flags.master_port;
    o.master_port_from = "--master-port";
  } else if (auto port = env("MASTER_PORT")) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(port->c_str(), &end, 10);
    if (end == port->c_str() || *end != '\0' || errno == ERANGE || v < 0 || v > 65535)
      throw std::invalid_argument("MASTER_PORT='" + *port +
                                  "' (the launcher's environment): expected a port, 0 to 65535");
    o.master_port = static_cast<int>(v);
    o.master_port_from = "MASTER_PORT";
  } else if (job.master_port) {
    o.master_port = *job.master_port;
    o.master_port_from = job_key_label("dist.master_port", job.master_port_at);
  } else {
    o.master_port = flags.nnodes == 1 ? 0 : 29500;  // 0: launch() picks a free one
    o.master_port_from = "the default";
  }
  return o;
}

int run_launcher(const LauncherFlags& flags, const JobRendezvousKeys& job, int argc,
                 const char* const* argv, const ElasticAgentFactory& agents, bool gate) {
  if (is_launched_worker()) {
    std::cerr << "runner-host: error: --nproc-per-node/--nnodes given to a worker that the "
                 "launcher started (RH_LAUNCHED=1): a launch cannot be nested\n";
    return kExitInvalid;
  }
  std::vector<std::string> args(argv + std::min(argc, 1), argv + std::max(argc, 0));
  std::vector<std::string> worker_argv = strip_launcher_flags(args);
  worker_argv.insert(worker_argv.begin(), self_exe());
  try {
    LaunchOptions options = launch_options(
        flags, [](const char* name) { return std::getenv(name); }, job);
    options.gate = gate;
    return launch(options, worker_argv, agents);
  } catch (const std::invalid_argument& e) {
    std::cerr << "runner-host: error: " << e.what() << " (see runner-host --help)\n";
    return kExitInvalid;
  } catch (const std::exception& e) {
    std::cerr << "runner-host: error: launcher: " << e.what() << "\n";
    return kExitRunFailed;
  }
}

}  // namespace rh::launch
