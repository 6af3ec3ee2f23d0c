// Creates component instances from their job-file subtrees (`strategy:`,
// each item of `hooks:`, `checkpoint_io:`): finds the plugin (an explicit
// `plugin:` path, else the registry's search by file name; a type no plugin
// provides that is another tool's name for one of runner-host's, such as
// MMEngine's DeepSpeedStrategy for zero, is read as that type: TypeAliases.hpp),
// runs its Init once, calls Create, and reports every key of the subtree the
// component never looked up.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "abi/ComponentInstances.hpp"
#include "abi/PluginRegistry.hpp"

namespace rh::config {
class Node;
}

namespace rh::host {

class HostServices;

// Parses a hook priority: 0..100 or a level name (NORMAL, LOW...).
int parse_priority(const config::Node& node);

class ComponentFactory {
 public:
  // `job_dir` resolves relative `plugin:` paths; `work_dir` is passed to Create.
  ComponentFactory(PluginRegistry& registry, HostServices& services, std::filesystem::path job_dir,
                   std::string work_dir);
  ~ComponentFactory();
  ComponentFactory(const ComponentFactory&) = delete;
  ComponentFactory& operator=(const ComponentFactory&) = delete;

  // Loads the library of every component of the job (`strategy:`, each of
  // `hooks:`, `checkpoint_io:`) that names one with `plugin:`, before any
  // component is created: an explicit library beats the search path for
  // every component of its types, whatever their order in the job.
  void load_explicit_plugins(const config::Node& job_root);

  // Each throws HostError (code RH_ERROR_INVALID_CONFIG for job-file
  // mistakes) with a message naming the file, line, key path and plugin.
  std::unique_ptr<StrategyInstance> create_strategy(const config::Node& spec);
  std::unique_ptr<HookInstance> create_hook(const config::Node& spec);
  std::unique_ptr<CheckpointIoInstance> create_checkpoint_io(const config::Node& spec);

 private:
  const Component& resolve(rh_ComponentKind kind, const config::Node& spec);
  // Loads a `plugin:` path (relative to the job file); a refusal is a config
  // error at that key.
  Plugin& load_explicit(const config::Node& plugin_node);
  // Resolves the component, runs its plugin's Init, makes its context.
  InstanceInfo prepare(rh_ComponentKind kind, const config::Node& spec);
  rh_CreateArgs create_args(const InstanceInfo& info, const config::Node& spec) const;
  // Turns a failed Create into a HostError naming the component.
  void check_create(const InstanceInfo& info, rh_Error* error) const;
  // Throws (after the caller destroyed nothing yet) when the component left
  // keys of its subtree unread; the caller's instance is destroyed by RAII.
  void check_unknown_keys(const InstanceInfo& info, const config::Node& spec) const;

  PluginRegistry& registry_;
  HostServices& services_;
  std::filesystem::path job_dir_;
  std::string job_dir_str_;  // job_dir_ as rh_CreateArgs.job_dir shows it
  std::string work_dir_;
};

}  // namespace rh::host
