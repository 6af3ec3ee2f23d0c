// Finds, loads and checks plugins, and keeps them by kind and `type:` name.
//
// Loading follows DESIGN.md §2: RTLD_NOW | RTLD_LOCAL (never DEEPBIND), never
// unloaded (RTLD_NODELETE), one entry symbol, handshake on the ABI major and
// the native tag. A bad file in a search directory is recorded as refused
// with its reason and does not stop the others.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "plugins/NativeTag.hpp"
#include "rh/rh_plugin.h"

namespace rh::host {

class HostServices;
struct Plugin;

// A directory to scan, with where it came from ("--plugin-path",
// "RH_PLUGIN_PATH", "install") for messages and --list-plugins.
struct SearchDir {
  std::filesystem::path dir;
  std::string origin;
};

// One component of a loaded plugin. Its vtable is copied into a host-sized,
// zero-filled struct: entries past the plugin's struct_size read as NULL.
struct Component {
  rh_ComponentKind kind;
  std::string type_name;
  std::string description;
  std::variant<rh_StrategyVtable, rh_HookVtable, rh_CheckpointIoVtable> vtable;
  Plugin* plugin;
};

struct Plugin {
  std::filesystem::path path;
  std::string origin;
  std::string name;
  std::string version;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  NativeTag tag;
  std::vector<Component> components;
  // NULL when absent or past the plugin's struct_size.
  rh_Error* (*init)(const rh_InitArgs*) = nullptr;
  void (*shutdown)(void) = nullptr;
  bool initialized = false;
  std::shared_ptr<void> library;  // keeps the handle; RTLD_NODELETE keeps the code
};

struct RefusedPlugin {
  std::filesystem::path path;
  std::string origin;
  std::string reason;
};

const char* kind_name(rh_ComponentKind kind);  // "strategy", "hook", "checkpoint_io"

class PluginRegistry {
 public:
  PluginRegistry(NativeTag host_tag, HostServices& services);
  ~PluginRegistry();  // calls Shutdown of every initialized plugin, last first
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // Loads every shared library (*.so, *.so.N) directly in each directory, in
  // order; a failure is recorded in refused(). Missing directories are skipped.
  void scan(const std::vector<SearchDir>& dirs);
  // Loads one library; throws HostError with the reason when it is refused.
  // Loading the same file twice returns the first load.
  Plugin& load(const std::filesystem::path& path, const std::string& origin);

  // First component of `kind` named `type` in load order; nullptr if none.
  const Component* find(rh_ComponentKind kind, const std::string& type) const;
  // Every type name of `kind` (for "did you mean" and listings).
  std::vector<std::string> type_names(rh_ComponentKind kind) const;

  // Calls the plugin's Init once; throws HostError naming the plugin path.
  void initialize(Plugin& plugin);

  const std::vector<std::unique_ptr<Plugin>>& plugins() const { return plugins_; }
  const std::vector<RefusedPlugin>& refused() const { return refused_; }
  const std::vector<SearchDir>& searched() const { return searched_; }
  const NativeTag& host_tag() const { return host_tag_; }

 private:
  NativeTag host_tag_;
  HostServices& services_;
  std::vector<std::unique_ptr<Plugin>> plugins_;
  std::vector<RefusedPlugin> refused_;
  std::vector<SearchDir> searched_;
};

}  // namespace rh::host
