// Opens the strategy library under test through the host's own registry
// (host/abi/PluginRegistry: the handshake every job does) and says what it
// provides. The conformance program is the launcher-side runner-host, which
// does not link LibTorch, so the host's native tag is asked of the
// runner library (`runner-host --version`), as a job would compare it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace rh::cli::conformance {

struct PluginProbe {
  bool loaded = false;
  std::string error;  // why the registry refused it, or what is missing
  std::string plugin_name;
  std::string plugin_version;
  uint32_t abi_major = 0, abi_minor = 0;
  std::string native_tag;                   // the plugin's, as --list-plugins prints it
  std::string host_native_tag;              // the host's
  std::vector<std::string> strategy_types;  // its strategy components
  std::string type;                         // the one under test; empty when none fits
  bool tensor_parallel = false;             // it has TensorParallelPlan (ABI 1.11)
};

// `type`: --type, empty to take the library's only strategy. `program`: the
// runner-host executable (for its native tag).
PluginProbe probe_plugin(const std::filesystem::path& program, const std::filesystem::path& library,
                         const std::string& type);

}  // namespace rh::cli::conformance
