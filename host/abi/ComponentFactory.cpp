#include "abi/ComponentFactory.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginCall.hpp"
#include "abi/TypeAliases.hpp"
#include "config/ConfigNode.hpp"
#include "config/Suggest.hpp"

namespace fs = std::filesystem;

namespace rh::host {
namespace {

const rh_ConfigNode* handle_of(const config::Node& n) {
  return reinterpret_cast<const rh_ConfigNode*>(&n);
}

[[noreturn]] void config_error(const config::Node& at, const std::string& message) {
  throw HostError(RH_ERROR_INVALID_CONFIG,
                  config::ConfigError(at.location(), at.path(), message).what());
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// The file names of the plugins runner-host ships (generated from
// plugins/CMakeLists.txt), NULL-terminated: a job may name one that this
// build did not build. A build outside runner-host's CMake project (the
// fuzz targets) has no list; PluginRegistryTest and QuickstartTarget check
// the main build's.
#if __has_include("abi/ShippedPlugins.inc")
constexpr const char* kShippedPlugins[] = {
#include "abi/ShippedPlugins.inc"
    nullptr};
#else
constexpr const char* kShippedPlugins[] = {nullptr};
#endif

bool is_shipped(const std::string& file) {
  for (const char* const* p = kShippedPlugins; *p != nullptr; ++p)
    if (file == *p) return true;
  return false;
}

// "Searched: --plugin-path /a; RH_PLUGIN_PATH /b; install /c (missing)"
std::string describe_search(const PluginRegistry& registry) {
  std::vector<std::string> dirs;
  for (const SearchDir& d : registry.searched()) {
    std::error_code ec;
    dirs.push_back(d.origin + " " + d.dir.string() +
                   (fs::is_directory(d.dir, ec) ? "" : " (missing)"));
  }
  std::string out =
      "searched: " + (dirs.empty() ? std::string("(no directories)") : join(dirs, "; "));
  for (const RefusedPlugin& r : registry.refused())
    out += "\n  refused " + r.path.string() + ": " + r.reason;
  return out;
}

}  // namespace

int parse_priority(const config::Node& node) {
  static const std::map<std::string, int> kLevels = {
      {"HIGHEST", RH_PRIORITY_HIGHEST}, {"VERY_HIGH", RH_PRIORITY_VERY_HIGH},
      {"HIGH", RH_PRIORITY_HIGH},       {"ABOVE_NORMAL", RH_PRIORITY_ABOVE_NORMAL},
      {"NORMAL", RH_PRIORITY_NORMAL},   {"BELOW_NORMAL", RH_PRIORITY_BELOW_NORMAL},
      {"LOW", RH_PRIORITY_LOW},         {"VERY_LOW", RH_PRIORITY_VERY_LOW},
      {"LOWEST", RH_PRIORITY_LOWEST}};
  auto it = kLevels.find(node.as_string());
  if (it != kLevels.end()) return it->second;
  int64_t value = node.as_int();
  if (value < 0 || value > 100)
    config_error(node, "priority must be 0..100 or a level name, got " + node.as_string());
  return static_cast<int>(value);
}

// ---- Factory ------------------------------------------------------------------

ComponentFactory::ComponentFactory(PluginRegistry& registry, HostServices& services,
                                   fs::path job_dir, std::string work_dir)
    : registry_(registry),
      services_(services),
      job_dir_(std::move(job_dir)),
      job_dir_str_(job_dir_.string()),
      work_dir_(std::move(work_dir)) {
  // CheckpointIo_Create (a wrapper's inner component) comes here.
  services_.set_checkpoint_io_factory(
      [this](const config::Node& spec) { return create_checkpoint_io(spec); });
}

ComponentFactory::~ComponentFactory() { services_.set_checkpoint_io_factory({}); }

Plugin& ComponentFactory::load_explicit(const config::Node& plugin_node) {
  fs::path path = plugin_node.as_string();
  if (path.is_relative()) path = job_dir_ / path;
  try {
    return registry_.load(path, "plugin:");
  } catch (const HostError& e) {
    config_error(plugin_node, "cannot use plugin " + path.string() + ": " + e.what());
  }
}

void ComponentFactory::load_explicit_plugins(const config::Node& job_root) {
  std::vector<const config::Node*> specs;
  for (const char* key : {"strategy", "checkpoint_io"})
    if (const config::Node* spec = job_root.find(key)) specs.push_back(spec);
  if (const config::Node* hooks = job_root.find("hooks"); hooks && hooks->is_sequence())
    for (const auto& hook : hooks->seq_items()) specs.push_back(hook.get());
  for (const config::Node* spec : specs)
    if (spec->is_map())
      if (const config::Node* plugin_node = spec->find("plugin")) load_explicit(*plugin_node);
}

const Component& ComponentFactory::resolve(rh_ComponentKind kind, const config::Node& spec) {
  // Looked up (recorded): a component inside another's subtree (CheckpointIo_Create) has its
  // `type:` and `plugin:` read here, not by the component around it.
  const config::Node* type_node = spec.lookup("type");
  if (type_node == nullptr) config_error(spec, "missing required key 'type'");
  const std::string type = type_node->as_string();
  const std::string kind_str = kind_name(kind);
  // Another tool's name for a type of runner-host's (TypeAliases.hpp): used
  // only when no plugin provides a type of that very name.
  const TypeAlias* alias = find_type_alias(kind, type);
  auto use_alias = [&](const Component& c) -> const Component& {
    spdlog::info("{} type {} ({} name) is runner-host's {}", kind_str, type, alias->origin,
                 alias->target);
    return c;
  };
  auto refuse_alias = [&] {
    config_error(*type_node, kind_str + " type '" + type + "': " + alias->refusal);
  };
  auto provided_by_plugin = [&](const Component& c) -> const Component& {
    if (alias != nullptr)
      spdlog::info("{} type {}: {} provides it, so it is that plugin's, not {} name for {}",
                   kind_str, type, c.plugin->path.string(), alias->origin,
                   alias->target.empty() ? "a refused type" : "runner-host's " + alias->target);
    return c;
  };

  if (const config::Node* plugin_node = spec.lookup("plugin")) {
    Plugin* plugin = &load_explicit(*plugin_node);
    std::vector<std::string> provided;
    const Component* target = nullptr;
    for (const Component& c : plugin->components) {
      if (c.kind == kind && c.type_name == type) {
        // Only for its warning when other libraries provide the type too; with
        // an explicit library providing it, find() opens nothing.
        registry_.find(kind, type);
        return provided_by_plugin(c);
      }
      if (alias != nullptr && c.kind == kind && c.type_name == alias->target) target = &c;
      provided.push_back(std::string(kind_name(c.kind)) + " '" + c.type_name + "'");
    }
    if (alias != nullptr && alias->target.empty()) refuse_alias();
    if (target != nullptr) return use_alias(*target);
    config_error(*type_node, "plugin " + plugin->path.string() + " provides no " + kind_str + " '" +
                                 type + "' (it provides " + join(provided, ", ") + ")");
  }

  const Component* found = nullptr;
  try {
    found = registry_.find(kind, type);
  } catch (const HostError& e) {
    config_error(*type_node, e.what());
  }
  if (found != nullptr) return provided_by_plugin(*found);
  std::string looked_for = type;
  if (alias != nullptr) {
    if (alias->target.empty()) refuse_alias();
    try {
      found = registry_.find(kind, alias->target);
    } catch (const HostError& e) {
      config_error(*type_node, kind_str + " type '" + type + "' (" + alias->origin +
                                   " name for runner-host's " + alias->target + "): " + e.what());
    }
    if (found != nullptr) return use_alias(*found);
    looked_for = alias->target;
  }
  std::vector<std::string> names = registry_.type_names(kind);
  std::vector<std::string> candidates = names;
  for (const TypeAlias& a : type_aliases())
    if (a.kind == kind) candidates.push_back(a.name);
  std::string hint = config::suggest(type, candidates);
  std::string message = "no " + kind_str + " plugin provides type '" + looked_for + "'";
  if (alias != nullptr)
    message += " (the type of " + type + ", " + alias->origin + " name for it)";
  else if (!hint.empty())
    message += " (did you mean '" + hint + "'?)";
  message += "; available: " + (names.empty() ? std::string("none") : join(names, ", "));
  if (const std::string aliases = describe_type_aliases(kind); !aliases.empty())
    message += "; " + aliases;
  const std::string file = plugin_file_name(kind, looked_for);
  message += "; the search path finds a library by its file name, " + file +
             " (or name the library with plugin:); " + describe_search(registry_);
  if (is_shipped(file))
    message += "; " + file +
               " is a plugin runner-host ships but was not built here (tools/quickstart.sh "
               "builds only those configs/quickstart.yaml loads): tools/build.sh builds them all";
  config_error(*type_node, message);
}

InstanceInfo ComponentFactory::prepare(rh_ComponentKind kind, const config::Node& spec) {
  const Component& component = resolve(kind, spec);
  Plugin& plugin = *component.plugin;
  registry_.initialize(plugin);
  InstanceInfo info;
  info.component = &component;
  info.what = std::string(kind_name(kind)) + " '" + component.type_name + "' (" + plugin.name +
              ", " + plugin.path.string() + ")";
  info.context =
      services_.new_context(plugin.name, std::string(kind_name(kind)) + " " + component.type_name);
  return info;
}

rh_CreateArgs ComponentFactory::create_args(const InstanceInfo& info,
                                            const config::Node& spec) const {
  const std::string& type = info.component->type_name;
  return rh_CreateArgs{RH_CREATE_ARGS_STRUCT_SIZE,
                       services_.api(),
                       info.context,
                       handle_of(spec),
                       {type.data(), type.size()},
                       {work_dir_.data(), work_dir_.size()},
                       {job_dir_str_.data(), job_dir_str_.size()}};
}

void ComponentFactory::check_create(const InstanceInfo& info, rh_Error* error) const {
  if (error == nullptr) return;
  std::unique_ptr<rh_Error> owned(error);
  throw HostError(owned->code, info.what + ": Create failed: " + owned->message);
}

void ComponentFactory::check_unknown_keys(const InstanceInfo& info,
                                          const config::Node& spec) const {
  std::string what =
      std::string(kind_name(info.component->kind)) + " '" + info.component->type_name + "'";
  auto errors = config::unknown_keys(spec, {"type", "plugin", "priority", "on_error"}, what);
  if (errors.empty()) return;
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.what());
  throw HostError(RH_ERROR_INVALID_CONFIG, join(lines, "\n"));
}

std::unique_ptr<StrategyInstance> ComponentFactory::create_strategy(const config::Node& spec) {
  InstanceInfo info = prepare(RH_COMPONENT_STRATEGY, spec);
  const auto& vt = std::get<rh_StrategyVtable>(info.component->vtable);
  rh_CreateArgs args = create_args(info, spec);
  rh_StrategyInstance* handle = nullptr;
  check_create(info, call_plugin(info.what + " Create", [&] { return vt.Create(&args, &handle); }));
  auto instance = std::make_unique<StrategyInstance>(info, handle);
  check_unknown_keys(info, spec);
  return instance;
}

std::unique_ptr<HookInstance> ComponentFactory::create_hook(const config::Node& spec) {
  InstanceInfo info = prepare(RH_COMPONENT_HOOK, spec);
  const auto& vt = std::get<rh_HookVtable>(info.component->vtable);
  rh_CreateArgs args = create_args(info, spec);
  rh_HookInstance* handle = nullptr;
  check_create(info, call_plugin(info.what + " Create", [&] { return vt.Create(&args, &handle); }));
  auto instance =
      std::make_unique<HookInstance>(info, handle, RH_PRIORITY_NORMAL, RH_EVENT_MASK_ALL);
  // Ask for mask and priority once; a `priority:` key overrides the plugin's.
  uint64_t mask = vt.EventMask ? vt.EventMask(handle) : RH_EVENT_MASK_ALL;
  int priority = vt.Priority ? vt.Priority(handle) : RH_PRIORITY_NORMAL;
  if (priority < 0 || priority > 100)
    throw HostError(RH_ERROR_INTERNAL, info.what + ": Priority() returned " +
                                           std::to_string(priority) + ", outside 0..100");
  if (const config::Node* p = spec.find("priority")) priority = parse_priority(*p);
  instance->set_dispatch(priority, mask);
  if (const config::Node* policy = spec.find("on_error"))
    instance->set_warn_on_error(policy->as_string() == "warn");
  check_unknown_keys(info, spec);
  return instance;
}

std::unique_ptr<CheckpointIoInstance> ComponentFactory::create_checkpoint_io(
    const config::Node& spec) {
  InstanceInfo info = prepare(RH_COMPONENT_CHECKPOINT_IO, spec);
  const auto& vt = std::get<rh_CheckpointIoVtable>(info.component->vtable);
  rh_CreateArgs args = create_args(info, spec);
  rh_CheckpointIoInstance* handle = nullptr;
  check_create(info, call_plugin(info.what + " Create", [&] { return vt.Create(&args, &handle); }));
  auto instance = std::make_unique<CheckpointIoInstance>(info, handle);
  check_unknown_keys(info, spec);
  return instance;
}

}  // namespace rh::host
