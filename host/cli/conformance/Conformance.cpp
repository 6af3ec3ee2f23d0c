#include "cli/conformance/Conformance.hpp"

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/conformance/Checks.hpp"

namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
// One job's limit: the slowest here trains 8 iterations of a tiny mlp on 3
// ranks, a few seconds on 2 cores.
constexpr std::chrono::seconds kJobTimeout{300};

// `strategy:` as a flow map: type, plugin, then the --config keys.
YAML::Node strategy_node(const ConformanceOptions& o, const std::string& type) {
  YAML::Node s(YAML::NodeType::Map);
  s["type"] = type;
  s["plugin"] = o.strategy.string();
  if (o.config.empty()) return s;
  YAML::Node keys;
  try {
    keys = YAML::LoadFile(o.config.string());
  } catch (const YAML::Exception& e) {
    throw std::runtime_error("--config " + o.config.string() + ": " + e.what());
  }
  if (keys.IsNull()) return s;
  if (!keys.IsMap())
    throw std::runtime_error("--config " + o.config.string() +
                             ": expected a YAML map of the strategy's keys (they go under "
                             "`strategy:`)");
  for (const auto& kv : keys) {
    const std::string key = kv.first.as<std::string>();
    if (key == "type" || key == "plugin")
      throw std::runtime_error("--config " + o.config.string() + ": `" + key +
                               "` is set by --strategy/--type, not by the strategy's keys");
    s[key] = kv.second;
  }
  return s;
}

std::string flow(const YAML::Node& node) {
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << node;
  return e.c_str();
}

const char* word(Outcome o) {
  return o == Outcome::Pass ? "PASS" : o == Outcome::Fail ? "FAIL" : "SKIP";
}

}  // namespace

const std::vector<CheckEntry>& all_checks() {
  static const std::vector<CheckEntry> kChecks = {
      {"handshake", check_handshake, "loads through the registry; a --dry-run job is accepted"},
      {"lifecycle", check_lifecycle, "train and resume hook events equal the golden sequences"},
      {"equivalence", check_equivalence, "trains as ddp does (frozen block, clip, accumulation)"},
      {"exact_resume", check_exact_resume, "stop + resume mid-window = uninterrupted, bytewise"},
      {"checkpoints", check_checkpoints, "its checkpoints resume under ddp/single, ddp's under it"},
      {"bad_config", check_bad_config, "an unknown strategy key is refused, exit 2, key named"},
      {"faults", check_faults, "a killed rank ends the job non-zero, named, nothing left"},
      {"tensor_parallel", check_tensor_parallel,
       "a tensor-parallel plan trains a llama as ddp on its replicas (ABI 1.11)"},
  };
  return kChecks;
}

int run_conformance(const std::vector<std::string>& args) {
  ConformanceOptions o;
  try {
    o = parse_conformance_options(args);
  } catch (const std::exception& e) {
    std::cerr << "runner-host conformance: error: " << e.what()
              << " (see runner-host conformance --help)\n";
    return kExitUsage;
  }
  if (o.help) {
    std::cout << conformance_help();
    return 0;
  }
  std::error_code ec;
  const fs::path program = fs::read_symlink("/proc/self/exe", ec);

  fs::path root = o.keep;
  if (root.empty()) {
    std::string templ = (fs::temp_directory_path() / "rh-conformance.XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      std::cerr << "runner-host conformance: error: cannot create a directory like " << templ
                << " (set TMPDIR, or --keep DIR)\n";
      return kExitUsage;
    }
    root = templ;
  } else if (fs::create_directories(root, ec); ec) {
    std::cerr << "runner-host conformance: error: --keep " << root.string() << ": " << ec.message()
              << "\n";
    return kExitUsage;
  }

  const PluginProbe probe = probe_plugin(program, o.strategy, o.type);
  std::string yaml, yaml_unknown_key;
  try {
    YAML::Node node = strategy_node(o, probe.type.empty() ? o.type : probe.type);
    yaml = flow(node);
    node["no_such_key"] = 1;
    yaml_unknown_key = flow(node);
  } catch (const std::exception& e) {
    std::cerr << "runner-host conformance: error: " << e.what() << "\n";
    if (o.keep.empty()) fs::remove_all(root, ec);
    return kExitUsage;
  }
  std::cerr << "runner-host conformance: strategy " << yaml << "; jobs in " << root.string()
            << (o.keep.empty() ? " (removed at the end; --keep DIR keeps them)" : "") << "\n";

  JobRunner jobs(program, root, kJobTimeout);
  CheckContext ctx{o, program, probe, yaml, yaml_unknown_key, jobs};
  bool failed = false;
  for (const CheckEntry& c : all_checks()) {
    if (!o.only.empty() && o.only != c.name) continue;
    const auto start = std::chrono::steady_clock::now();
    CheckResult r;
    if (std::string(c.name) != "handshake" && probe.type.empty()) {
      r = skip("the library did not pass handshake: " + probe.error);
    } else {
      try {
        r = c.run(ctx);
      } catch (const std::exception& e) {
        r = fail(std::string("error: ") + e.what());
      }
    }
    failed = failed || r.outcome == Outcome::Fail || probe.type.empty();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << word(r.outcome) << " " << c.name << ": " << r.detail << " [" << std::fixed
              << std::setprecision(1) << s << " s]" << std::endl;
  }
  if (o.keep.empty()) fs::remove_all(root, ec);
  return failed ? kExitFailed : 0;
}

}  // namespace rh::cli::conformance
