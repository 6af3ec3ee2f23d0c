// Finds, loads and checks plugins, and keeps them by kind and `type:` name.
//
// Loading follows docs/architecture.md §2: RTLD_NOW | RTLD_LOCAL (never DEEPBIND), never
// unloaded (RTLD_NODELETE), one entry symbol, handshake on the ABI major and
// the native tag.
//
// A job opens only the libraries it uses: loading a library runs its
// constructors, so an unrelated or broken .so in a search directory must not
// affect a job. A (kind, type) is found by file name, as Triton finds a
// backend: the library for hook `trace` is librh_hook_trace.so (see
// plugin_file_name), taken from the first search directory holding that
// name. Only --list-plugins (scan) opens every library; there a bad file is
// recorded as refused with its reason and does not stop the others.
#pragma once

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "abi/NativeTag.hpp"
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
  // Loaded by load() (a `plugin:` path): its types beat the search path.
  bool explicit_load = false;
};

struct RefusedPlugin {
  std::filesystem::path path;
  std::string origin;
  std::string reason;
};

const char* kind_name(rh_ComponentKind kind);  // "strategy", "hook", "checkpoint_io"

// The file name under which the search path finds (kind, type):
// librh_<kind>_<type>.so with <kind> strategy, hook or ckpt_io (the shipped
// plugins' names: librh_hook_trace.so, librh_ckpt_io_safetensors.so).
std::string plugin_file_name(rh_ComponentKind kind, const std::string& type);

// The handshake's checks on what the entry symbol returned: ABI major, struct
// sizes, name, native tag, components and their vtables. Throws HostError
// (RH_ERROR_FAILED_PRECONDITION) with the reason; path, origin and library
// are left for the caller. Separate from loading so that it can be run on a
// struct in memory (tests/fuzz).
std::unique_ptr<Plugin> read_plugin_info(const rh_PluginInfo* info, const NativeTag& host_tag);

class PluginRegistry {
 public:
  PluginRegistry(NativeTag host_tag, HostServices& services);
  ~PluginRegistry();  // calls Shutdown of every initialized plugin, last first
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // The directories find() looks in, in order; opens nothing.
  void set_search_path(const std::vector<SearchDir>& dirs);
  // For --list-plugins: sets the search path and loads every shared library
  // (*.so, *.so.N) directly in each directory, in order; a failure is
  // recorded in refused(). Missing directories are skipped. Warns once for
  // each (kind, type) that several loaded libraries provide, saying which
  // one a job's `type:` gets.
  void scan(const std::vector<SearchDir>& dirs);
  // Loads one library named explicitly (a component's `plugin:`, a test);
  // throws HostError with the reason when it is refused. Loading the same
  // file twice returns the first load. Its components are found by find()
  // before anything on the search path.
  Plugin& load(const std::filesystem::path& path, const std::string& origin);

  // The component of `kind` named `type`, nullptr if none: the first
  // explicitly loaded library (load()) providing it, else the library named
  // plugin_file_name(kind, type) in the first search directory holding one,
  // loaded now. Warns once per (kind, type) when another candidate is
  // shadowed, naming both paths. Throws HostError naming the file when that
  // library is refused or does not provide (kind, type), and for a type that
  // is not a valid type name.
  const Component* find(rh_ComponentKind kind, const std::string& type);
  // Every type name of `kind` that loaded libraries provide or that a file
  // name on the search path promises (for "did you mean"); opens nothing.
  std::vector<std::string> type_names(rh_ComponentKind kind) const;
  // The files named plugin_file_name(kind, type) on the search path, in
  // search order, each once, with the origin of its directory.
  std::vector<std::pair<std::filesystem::path, std::string>> candidate_files(
      rh_ComponentKind kind, const std::string& type) const;

  // Calls the plugin's Init once; throws HostError naming the plugin path.
  void initialize(Plugin& plugin);

  const std::vector<std::unique_ptr<Plugin>>& plugins() const { return plugins_; }
  const std::vector<RefusedPlugin>& refused() const { return refused_; }
  const std::vector<SearchDir>& searched() const { return searched_; }
  const NativeTag& host_tag() const { return host_tag_; }

 private:
  Plugin& load_library(const std::filesystem::path& path, const std::string& origin,
                       bool explicit_load);
  // Warns once per (kind, type) that `chosen` shadows `others`.
  void warn_shadowed(rh_ComponentKind kind, const std::string& type, const std::string& chosen,
                     const std::vector<std::string>& others, const std::string& why);

  NativeTag host_tag_;
  HostServices& services_;
  std::vector<std::unique_ptr<Plugin>> plugins_;
  std::vector<RefusedPlugin> refused_;
  std::vector<SearchDir> searched_;
  std::set<std::pair<int, std::string>> warned_;  // (kind, type) already warned about
};

}  // namespace rh::host
