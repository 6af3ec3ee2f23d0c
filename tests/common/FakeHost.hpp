// FakeHost.hpp — just enough of a host to drive a plugin without the real
// one: dlopen + rh_plugin_info, and an rh_HostApi table whose errors, config
// (a flat map of scalars), logging and state dicts are in-memory fakes. The
// other entries are NULL ("not provided"), as a host may leave them.
//
// Used by the ABI tests to check that the test plugins and the trace hook do
// what their comments promise, independently of the real host's loader.
#pragma once

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "rh/rh_plugin.h"

// The opaque handles, defined by this fake host.
struct rh_Error {
  rh_ErrorCode code;
  std::string message;
};
struct rh_ConfigNode {
  rh_ConfigKind kind = RH_CONFIG_MAP;
  std::string path;    // dotted key path
  std::string scalar;  // RH_CONFIG_SCALAR
  std::map<std::string, rh_ConfigNode> children;
};
struct rh_Context {
  std::vector<std::pair<rh_LogLevel, std::string>> logs;
};
struct rh_StateDict {
  std::map<std::string, std::string> bytes;
};

namespace rh::test {

inline std::string view(rh_StringView s) { return std::string(s.data, s.size); }

// One fake host at a time (its table is plain C: the functions reach it
// through this pointer).
class FakeHost;
inline FakeHost*& current_fake_host() {
  static FakeHost* host = nullptr;
  return host;
}

class FakeHost {
 public:
  FakeHost() {
    current_fake_host() = this;
    api_.struct_size = RH_HOST_API_STRUCT_SIZE;
    api_.abi_major = RH_ABI_VERSION_MAJOR;
    api_.abi_minor = RH_ABI_VERSION_MINOR;
    api_.Error_Create = &ErrorCreate;
    api_.Error_Destroy = [](rh_Error* e) { delete e; };
    api_.Error_Code = [](const rh_Error* e) { return e->code; };
    api_.Error_Message = [](const rh_Error* e) {
      return rh_StringView{e->message.data(), e->message.size()};
    };
    api_.Log = [](rh_Context* c, rh_LogLevel level, const char* m, size_t n) {
      c->logs.emplace_back(level, std::string(m, n));
    };
    api_.Log_IsEnabled = [](rh_Context*, rh_LogLevel) -> int32_t { return 1; };
    api_.Config_Kind = [](const rh_ConfigNode* n) { return n->kind; };
    api_.Config_Get = &ConfigGet;
    api_.Config_Size = [](const rh_ConfigNode* n) { return n->children.size(); };
    api_.Config_AsInt = &ConfigAsInt;
    api_.Config_AsDouble = &ConfigAsDouble;
    api_.Config_AsBool = &ConfigAsBool;
    api_.Config_AsString = &ConfigAsString;
    api_.Config_Path = [](const rh_ConfigNode* n) {
      return rh_StringView{n->path.data(), n->path.size()};
    };
    api_.Config_Location = [](const rh_ConfigNode*) {
      return rh_StringView RH_STR("job.yaml:7:3");
    };
    api_.Config_Error = &ConfigError;
    api_.StateDict_PutBytes = &StateDictPutBytes;
    api_.StateDict_GetBytes = &StateDictGetBytes;
    api_.StateDict_Size = [](const rh_StateDict* d) { return d->bytes.size(); };
  }
  ~FakeHost() { current_fake_host() = nullptr; }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  const rh_HostApi* api() const { return &api_; }
  rh_Context* context() { return &context_; }
  // Keys looked up with Config_Get, as "<path>.<key>".
  const std::set<std::string>& lookups() const { return lookups_; }

  // A config map of scalars: {{"path", "x.log"}, {"append", "true"}}; the
  // value "~" makes a null node.
  rh_ConfigNode& config(const std::map<std::string, std::string>& scalars,
                        const std::string& path = "hooks.0") {
    config_ = rh_ConfigNode{};
    config_.path = path;
    for (const auto& [key, value] : scalars) {
      rh_ConfigNode child;
      child.kind = value == "~" ? RH_CONFIG_NULL : RH_CONFIG_SCALAR;
      child.path = path + "." + key;
      child.scalar = value;
      config_.children.emplace(key, child);
    }
    return config_;
  }

  rh_CreateArgs create_args(const std::string& type, const std::string& work_dir) {
    type_ = type;
    work_dir_ = work_dir;
    rh_CreateArgs args{};
    args.struct_size = RH_CREATE_ARGS_STRUCT_SIZE;
    args.host = &api_;
    args.context = &context_;
    args.config = &config_;
    args.type_name = {type_.data(), type_.size()};
    args.work_dir = {work_dir_.data(), work_dir_.size()};
    return args;
  }

  // Takes ownership of an error returned by a plugin: {code, message}, or
  // {RH_ERROR_OK, ""} for NULL.
  static std::pair<rh_ErrorCode, std::string> take(rh_Error* error) {
    if (error == nullptr) return {RH_ERROR_OK, ""};
    std::pair<rh_ErrorCode, std::string> out{error->code, error->message};
    delete error;
    return out;
  }

 private:
  static rh_Error* ErrorCreate(rh_ErrorCode code, const char* m, size_t n) {
    return new rh_Error{code, std::string(m, n)};
  }
  static const rh_ConfigNode* ConfigGet(const rh_ConfigNode* n, const char* k, size_t size) {
    std::string key(k, size);
    current_fake_host()->lookups_.insert(n->path + "." + key);
    auto it = n->children.find(key);
    return it == n->children.end() ? nullptr : &it->second;
  }
  static rh_Error* TypeError(const rh_ConfigNode* n, const char* expected) {
    return ConfigErrorText(n, std::string("expected ") + expected + ", got '" + n->scalar + "'");
  }
  static rh_Error* ConfigAsInt(const rh_ConfigNode* n, int64_t* out) {
    char* end = nullptr;
    long long v = n->kind == RH_CONFIG_SCALAR ? std::strtoll(n->scalar.c_str(), &end, 10) : 0;
    if (end == nullptr || end == n->scalar.c_str() || *end != '\0')
      return TypeError(n, "an integer");
    *out = v;
    return nullptr;
  }
  static rh_Error* ConfigAsDouble(const rh_ConfigNode* n, double* out) {
    char* end = nullptr;
    double v = n->kind == RH_CONFIG_SCALAR ? std::strtod(n->scalar.c_str(), &end) : 0;
    if (end == nullptr || end == n->scalar.c_str() || *end != '\0') return TypeError(n, "a number");
    *out = v;
    return nullptr;
  }
  static rh_Error* ConfigAsBool(const rh_ConfigNode* n, int32_t* out) {
    if (n->kind == RH_CONFIG_SCALAR && (n->scalar == "true" || n->scalar == "false")) {
      *out = n->scalar == "true";
      return nullptr;
    }
    return TypeError(n, "a bool");
  }
  static rh_Error* ConfigAsString(const rh_ConfigNode* n, rh_StringView* out) {
    if (n->kind != RH_CONFIG_SCALAR) return TypeError(n, "a string");
    *out = {n->scalar.data(), n->scalar.size()};
    return nullptr;
  }
  static rh_Error* ConfigErrorText(const rh_ConfigNode* n, const std::string& message) {
    return new rh_Error{RH_ERROR_INVALID_CONFIG, "job.yaml:7:3: " + n->path + ": " + message};
  }
  static rh_Error* ConfigError(const rh_ConfigNode* n, const char* m, size_t size) {
    return ConfigErrorText(n, std::string(m, size));
  }
  static rh_Error* StateDictPutBytes(rh_StateDict* d, const char* k, size_t ks, const void* data,
                                     size_t size) {
    d->bytes[std::string(k, ks)] = std::string(static_cast<const char*>(data), size);
    return nullptr;
  }
  static rh_Error* StateDictGetBytes(const rh_StateDict* d, const char* k, size_t ks,
                                     rh_StringView* out) {
    auto it = d->bytes.find(std::string(k, ks));
    if (it == d->bytes.end()) {
      return new rh_Error{RH_ERROR_NOT_FOUND, "no key '" + std::string(k, ks) + "'"};
    }
    *out = {it->second.data(), it->second.size()};
    return nullptr;
  }

  rh_HostApi api_{};
  rh_Context context_;
  rh_ConfigNode config_;
  std::set<std::string> lookups_;
  std::string type_;
  std::string work_dir_;
};

// A loaded plugin library (never unloaded, as the host does).
struct LoadedPlugin {
  void* handle = nullptr;
  rh_PluginInfoFn entry = nullptr;

  static LoadedPlugin open(const std::string& path) {
    LoadedPlugin p;
    p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (p.handle == nullptr) throw std::runtime_error("dlopen " + path + ": " + dlerror());
    p.entry = reinterpret_cast<rh_PluginInfoFn>(dlsym(p.handle, RH_PLUGIN_ENTRY_SYMBOL));
    return p;
  }
  const rh_PluginInfo* info() const {
    return entry ? entry(RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR) : nullptr;
  }
  // Component `index`, walking the array with the plugin's own stride.
  const rh_Component* component(size_t index) const {
    const rh_PluginInfo* i = info();
    const auto* base = reinterpret_cast<const unsigned char*>(i->components);
    return reinterpret_cast<const rh_Component*>(base + index * i->components[0].struct_size);
  }
};

// Events with a run state, metrics and checkpoint arguments.
struct EventBuilder {
  rh_RunState state{};
  std::vector<rh_Metric> metrics;
  rh_StateDict* checkpoint = nullptr;
  std::string dir;

  EventBuilder() { state.struct_size = RH_RUN_STATE_STRUCT_SIZE; }
  rh_HookEventArgs args(rh_HookEvent event) const {
    rh_HookEventArgs a{};
    a.struct_size = RH_HOOK_EVENT_ARGS_STRUCT_SIZE;
    a.event = event;
    a.state = &state;
    a.metrics = metrics.empty() ? nullptr : metrics.data();
    a.num_metrics = metrics.size();
    a.checkpoint = checkpoint;
    a.checkpoint_dir = {dir.data(), dir.size()};
    return a;
  }
};

}  // namespace rh::test
