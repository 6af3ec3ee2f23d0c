#include "cli/conformance/PluginProbe.hpp"

#include <unistd.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <variant>

#include "abi/HostApi.hpp"
#include "abi/PluginRegistry.hpp"
#include "cli/conformance/ChildProcess.hpp"
#include "cli/conformance/JobRunner.hpp"

namespace fs = std::filesystem;

namespace rh::cli::conformance {
namespace {

// "runner-host 0.1.0 (ABI 1.8, native tag torch 1.13.0 cpu cxx11abi=1)".
std::optional<host::NativeTag> host_tag(const fs::path& program, std::string& error) {
  const fs::path log =
      fs::temp_directory_path() / ("rh-conformance-version-" + std::to_string(::getpid()));
  std::string out;
  {
    ChildProcess version(program, {"--version"}, log);
    const std::optional<int> code = version.wait(std::chrono::seconds(60));
    out = read_text(log);
    std::error_code ec;
    fs::remove(log, ec);
    if (code != 0) {
      error = program.string() + " --version failed: " + out;
      return std::nullopt;
    }
  }
  std::smatch m;
  if (!std::regex_search(out, m, std::regex(R"(native tag (.*)\))"))) {
    error = "cannot read the native tag from `" + program.string() + " --version`: " + out;
    return std::nullopt;
  }
  host::NativeTag tag;
  const std::string text = m[1];
  if (text.rfind("none", 0) == 0) return tag;
  std::smatch t;
  if (!std::regex_match(text, t, std::regex(R"(torch (\S+) (\S+) cxx11abi=(-?\d+))"))) {
    error = "cannot read the native tag '" + text + "'";
    return std::nullopt;
  }
  tag.torch_version = t[1];
  tag.device = t[2];
  tag.cxx11_abi = std::stoi(t[3]);
  return tag;
}

}  // namespace

PluginProbe probe_plugin(const fs::path& program, const fs::path& library,
                         const std::string& type) {
  PluginProbe p;
  const std::optional<host::NativeTag> tag = host_tag(program, p.error);
  if (!tag) return p;
  p.host_native_tag = tag->str();
  host::HostServices services;
  host::PluginRegistry registry(*tag, services);
  const host::Plugin* plugin = nullptr;
  try {
    plugin = &registry.load(library, "--strategy");
  } catch (const std::exception& e) {
    p.error = e.what();
    return p;
  }
  p.loaded = true;
  p.plugin_name = plugin->name;
  p.plugin_version = plugin->version;
  p.abi_major = plugin->abi_major;
  p.abi_minor = plugin->abi_minor;
  p.native_tag = plugin->tag.str();
  for (const auto& c : plugin->components)
    if (c.kind == RH_COMPONENT_STRATEGY) p.strategy_types.push_back(c.type_name);
  std::string listed;
  for (const auto& t : p.strategy_types) listed += (listed.empty() ? "" : ", ") + t;
  if (p.strategy_types.empty()) {
    p.error = library.string() + " provides no strategy component";
  } else if (!type.empty()) {
    for (const auto& t : p.strategy_types)
      if (t == type) p.type = t;
    if (p.type.empty())
      p.error = library.string() + " provides no strategy '" + type + "' (it has: " + listed + ")";
  } else if (p.strategy_types.size() > 1) {
    p.error =
        library.string() + " provides several strategies (" + listed + "): pick one with --type";
  } else {
    p.type = p.strategy_types.front();
  }
  for (const auto& c : plugin->components)
    if (c.kind == RH_COMPONENT_STRATEGY && c.type_name == p.type)
      p.tensor_parallel = std::get<rh_StrategyVtable>(c.vtable).TensorParallelPlan != nullptr;
  return p;
}

}  // namespace rh::cli::conformance
