#include "abi/PluginRegistry.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <type_traits>

#include "abi/HostApi.hpp"
#include "abi/HostError.hpp"
#include "abi/PluginCall.hpp"

namespace fs = std::filesystem;

namespace rh::host {

const char* kind_name(rh_ComponentKind kind) {
  switch (kind) {
    case RH_COMPONENT_STRATEGY:
      return "strategy";
    case RH_COMPONENT_HOOK:
      return "hook";
    case RH_COMPONENT_CHECKPOINT_IO:
      return "checkpoint_io";
  }
  return "unknown";
}

std::string plugin_file_name(rh_ComponentKind kind, const std::string& type) {
  // checkpoint_io is spelt ckpt_io, as the shipped librh_ckpt_io_safetensors.so.
  const char* tag = kind == RH_COMPONENT_CHECKPOINT_IO ? "ckpt_io" : kind_name(kind);
  return std::string("librh_") + tag + "_" + type + ".so";
}

namespace {

// What a component's `type:` may be (and so what may go into a file name:
// no '/', so a type cannot reach outside the search directories).
const std::regex& type_name_pattern() {
  static const std::regex kTypeName("[A-Za-z_][A-Za-z0-9_.-]*");
  return kTypeName;
}

std::string describe(const fs::path& path, const std::string& origin) {
  return path.string() + " (" + origin + ")";
}

[[noreturn]] void refuse(const std::string& reason) {
  throw HostError(RH_ERROR_FAILED_PRECONDITION, reason);
}

std::string view(rh_StringView s) { return s.data ? std::string(s.data, s.size) : std::string(); }

// Boost.DLL's message is "boost::dll::shared_library::load() failed (dlerror
// system message: <text>): <errc>"; keep the dlerror text.
std::string dl_reason(const std::string& what) {
  const std::string marker = "dlerror system message: ";
  auto pos = what.find(marker);
  if (pos == std::string::npos) return what;
  auto end = what.rfind("): ");
  return what.substr(pos + marker.size(), end == std::string::npos || end < pos
                                              ? std::string::npos
                                              : end - pos - marker.size());
}

// A truncated library (a copy cut short, a full disk) maps segments past the
// end of the file: the dynamic linker touches them while it loads and the
// process dies of SIGBUS. Checked here first, from the program headers
// (read(), never mapped): every PT_LOAD and PT_DYNAMIC must lie inside the
// file. Anything that is not a well-formed ELF header is left to dlopen,
// whose own message says what is wrong.
template <class Ehdr, class Phdr>
void check_segments_inside(std::ifstream& in, uintmax_t file_size) {
  Ehdr eh{};
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(&eh), sizeof eh) || eh.e_phentsize != sizeof(Phdr)) return;
  for (size_t i = 0; i < eh.e_phnum; ++i) {
    Phdr ph{};
    in.seekg(static_cast<std::streamoff>(eh.e_phoff + i * sizeof ph));
    if (!in.read(reinterpret_cast<char*>(&ph), sizeof ph)) return;  // dlopen says so
    if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC) continue;
    const uintmax_t end = uintmax_t{ph.p_offset} + ph.p_filesz;
    if (end > file_size)
      refuse("cannot load the shared library: it is truncated (" + std::to_string(file_size) +
             " bytes, its " + (ph.p_type == PT_LOAD ? "loadable segment" : "dynamic section") +
             " at offset " + std::to_string(ph.p_offset) + " ends at byte " + std::to_string(end) +
             "): copy or rebuild it again");
  }
}

void check_not_truncated(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  unsigned char ident[EI_NIDENT] = {0};
  if (ec || !in.read(reinterpret_cast<char*>(ident), EI_NIDENT)) return;
  if (std::memcmp(ident, ELFMAG, SELFMAG) != 0) return;
  if (ident[EI_CLASS] == ELFCLASS64)
    check_segments_inside<Elf64_Ehdr, Elf64_Phdr>(in, size);
  else if (ident[EI_CLASS] == ELFCLASS32)
    check_segments_inside<Elf32_Ehdr, Elf32_Phdr>(in, size);
}

// Copies a plugin's vtable (whose own struct_size may be smaller or larger
// than ours) into a zero-filled host-sized struct.
template <class Vtable>
Vtable copy_vtable(const void* source, size_t min_size, const std::string& what) {
  size_t plugin_size = *static_cast<const size_t*>(source);
  if (plugin_size < min_size) {
    refuse(what + ": vtable struct_size " + std::to_string(plugin_size) +
           " is smaller than the ABI 1.0 minimum " + std::to_string(min_size));
  }
  Vtable v;
  std::memset(&v, 0, sizeof v);
  std::memcpy(&v, source, std::min(plugin_size, sizeof v));
  return v;
}

void require(const void* fn, const std::string& what, const char* entry) {
  if (fn == nullptr) refuse(what + ": required vtable entry " + entry + " is NULL");
}

Component read_component(const rh_Component& c, Plugin* plugin) {
  // The plugin may have written any 32 bits into `kind`: reading them as the
  // enum before checking is undefined behaviour (found by tests/fuzz), so
  // read the raw bits first.
  std::underlying_type_t<rh_ComponentKind> raw_kind;
  static_assert(sizeof raw_kind == sizeof c.kind);
  std::memcpy(&raw_kind, &c.kind, sizeof raw_kind);
  std::string type_name = view(c.type_name);
  if (raw_kind != RH_COMPONENT_STRATEGY && raw_kind != RH_COMPONENT_HOOK &&
      raw_kind != RH_COMPONENT_CHECKPOINT_IO)
    refuse("component '" + type_name + "' has unknown kind " + std::to_string(raw_kind));
  const auto kind = static_cast<rh_ComponentKind>(raw_kind);
  Component out{kind, std::move(type_name), view(c.description), rh_HookVtable{}, plugin};
  std::string what = std::string(kind_name(kind)) + " '" + out.type_name + "'";
  if (!std::regex_match(out.type_name, type_name_pattern()))
    refuse("component type name '" + out.type_name + "' is not a valid identifier");
  if (c.vtable == nullptr) refuse(what + ": vtable is NULL");
  switch (kind) {
    case RH_COMPONENT_STRATEGY: {
      auto v = copy_vtable<rh_StrategyVtable>(c.vtable, RH_STRUCT_SIZE(rh_StrategyVtable, SetupEnv),
                                              what);
      require(reinterpret_cast<const void*>(v.Create), what, "Create");
      require(reinterpret_cast<const void*>(v.SetupEnv), what, "SetupEnv");
      out.vtable = v;
      break;
    }
    case RH_COMPONENT_HOOK: {
      auto v = copy_vtable<rh_HookVtable>(c.vtable, RH_STRUCT_SIZE(rh_HookVtable, OnEvent), what);
      require(reinterpret_cast<const void*>(v.Create), what, "Create");
      require(reinterpret_cast<const void*>(v.OnEvent), what, "OnEvent");
      out.vtable = v;
      break;
    }
    case RH_COMPONENT_CHECKPOINT_IO: {
      auto v = copy_vtable<rh_CheckpointIoVtable>(
          c.vtable, RH_STRUCT_SIZE(rh_CheckpointIoVtable, Load), what);
      require(reinterpret_cast<const void*>(v.Create), what, "Create");
      require(reinterpret_cast<const void*>(v.Save), what, "Save");
      require(reinterpret_cast<const void*>(v.Load), what, "Load");
      out.vtable = v;
      break;
    }
  }
  return out;
}

}  // namespace

std::unique_ptr<Plugin> read_plugin_info(const rh_PluginInfo* info, const NativeTag& host_tag) {
  if (info == nullptr)
    refuse(RH_PLUGIN_ENTRY_SYMBOL "() returned NULL: the plugin declines ABI " +
           std::to_string(RH_ABI_VERSION_MAJOR) + "." + std::to_string(RH_ABI_VERSION_MINOR));

  // struct_size first: the version fields must lie inside what the plugin
  // filled before they are read (they come right after it in every major).
  const size_t min_version = RH_STRUCT_SIZE(rh_PluginInfo, abi_minor);
  if (info->struct_size < min_version)
    refuse("rh_PluginInfo.struct_size is " + std::to_string(info->struct_size) +
           ", too small to hold the ABI version (at least " + std::to_string(min_version) + ")");
  auto plugin = std::make_unique<Plugin>();
  plugin->abi_major = info->abi_major;
  plugin->abi_minor = info->abi_minor;
  std::string host_abi =
      std::to_string(RH_ABI_VERSION_MAJOR) + "." + std::to_string(RH_ABI_VERSION_MINOR);
  if (info->abi_major != RH_ABI_VERSION_MAJOR) {
    refuse("built for runner-host ABI " + std::to_string(info->abi_major) + "." +
           std::to_string(info->abi_minor) + " but this host speaks ABI " + host_abi +
           " (the major versions must match): rebuild the plugin against SDK " +
           std::to_string(RH_ABI_VERSION_MAJOR) + ".x");
  }
  const size_t min_info = RH_STRUCT_SIZE(rh_PluginInfo, num_components);
  if (info->struct_size < min_info) {
    refuse("rh_PluginInfo.struct_size is " + std::to_string(info->struct_size) +
           ", smaller than the ABI 1.0 minimum " + std::to_string(min_info));
  }
  plugin->name = view(info->name);
  plugin->version = view(info->version);
  if (plugin->name.empty()) refuse("the plugin has no name");

  const rh_NativeTag& tag = info->native_tag;
  if (tag.struct_size < RH_NATIVE_TAG_STRUCT_SIZE)
    refuse("rh_NativeTag.struct_size " + std::to_string(tag.struct_size) + " is too small");
  plugin->tag = NativeTag{view(tag.torch_version), view(tag.device), tag.cxx11_abi};
  if (plugin->tag.links_torch() && !(plugin->tag == host_tag)) {
    refuse("native ABI tag mismatch: the plugin was built against " + plugin->tag.str() +
           " but the host uses " + host_tag.str() +
           "; rebuild the plugin against the host's LibTorch");
  }

  if (info->num_components == 0 || info->components == nullptr)
    refuse("the plugin provides no components");
  const size_t stride = info->components[0].struct_size;
  if (stride < RH_COMPONENT_STRUCT_SIZE)
    refuse("rh_Component.struct_size " + std::to_string(stride) +
           " is smaller than the ABI 1.0 minimum " + std::to_string(RH_COMPONENT_STRUCT_SIZE));
  // The array's elements are struct_size apart: a size that is not a
  // multiple of the struct's alignment cannot be an array of them.
  if (stride % alignof(rh_Component) != 0)
    refuse("rh_Component.struct_size " + std::to_string(stride) + " is not a multiple of " +
           std::to_string(alignof(rh_Component)) + ": the components array cannot be walked");
  std::set<std::pair<int, std::string>> seen;
  for (size_t i = 0; i < info->num_components; ++i) {
    const auto* c = reinterpret_cast<const rh_Component*>(
        reinterpret_cast<const char*>(info->components) + i * stride);
    Component comp = read_component(*c, plugin.get());
    if (!seen.insert({comp.kind, comp.type_name}).second)
      refuse(std::string("provides ") + kind_name(comp.kind) + " '" + comp.type_name + "' twice");
    plugin->components.push_back(std::move(comp));
  }
  if (RH_STRUCT_HAS(info, rh_PluginInfo, Init)) plugin->init = info->Init;
  if (RH_STRUCT_HAS(info, rh_PluginInfo, Shutdown)) plugin->shutdown = info->Shutdown;
  return plugin;
}

PluginRegistry::PluginRegistry(NativeTag host_tag, HostServices& services)
    : host_tag_(std::move(host_tag)), services_(services) {}

PluginRegistry::~PluginRegistry() {
  for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it) {
    Plugin& p = **it;
    if (p.initialized && p.shutdown != nullptr) {
      call_plugin("plugin " + p.path.string() + " Shutdown", [&]() -> rh_Error* {
        p.shutdown();
        return nullptr;
      });
    }
  }
}

Plugin& PluginRegistry::load(const fs::path& path, const std::string& origin) {
  return load_library(path, origin, true);
}

Plugin& PluginRegistry::load_library(const fs::path& path, const std::string& origin,
                                     bool explicit_load) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) canonical = fs::absolute(path);
  for (auto& p : plugins_) {
    if (p->path != canonical) continue;
    p->explicit_load = p->explicit_load || explicit_load;
    return *p;
  }
  if (!fs::exists(canonical)) throw HostError(RH_ERROR_NOT_FOUND, "no such file");
  if (!fs::is_regular_file(canonical)) refuse("not a regular file");

  // RTLD_NODELETE: plugins are never unloaded, even when the handle dies.
  auto mode = static_cast<boost::dll::load_mode::type>(RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  check_not_truncated(canonical);
  auto library = std::make_shared<boost::dll::shared_library>();
  try {
    library->load(canonical.string(), mode);
  } catch (const std::exception& e) {
    refuse("cannot load the shared library: " + dl_reason(e.what()));
  }
  if (!library->has(RH_PLUGIN_ENTRY_SYMBOL))
    refuse("not a runner-host plugin: it does not export " RH_PLUGIN_ENTRY_SYMBOL);
  auto* entry = &library->get<const rh_PluginInfo*(uint32_t, uint32_t)>(RH_PLUGIN_ENTRY_SYMBOL);

  const rh_PluginInfo* info = nullptr;
  rh_Error* err = call_plugin(canonical.string() + " " RH_PLUGIN_ENTRY_SYMBOL, [&]() -> rh_Error* {
    info = entry(RH_ABI_VERSION_MAJOR, RH_ABI_VERSION_MINOR);
    return nullptr;
  });
  if (err != nullptr) {
    std::unique_ptr<rh_Error> owned(err);
    refuse(owned->message);
  }
  std::unique_ptr<Plugin> plugin = read_plugin_info(info, host_tag_);
  plugin->path = canonical;
  plugin->origin = origin;
  plugin->library = library;
  plugin->explicit_load = explicit_load;
  plugins_.push_back(std::move(plugin));
  return *plugins_.back();
}

void PluginRegistry::set_search_path(const std::vector<SearchDir>& dirs) { searched_ = dirs; }

void PluginRegistry::scan(const std::vector<SearchDir>& dirs) {
  set_search_path(dirs);
  static const std::regex kSharedLibrary(R"(.*\.so(\.[0-9]+)*)");
  for (const SearchDir& d : dirs) {
    std::error_code ec;
    if (!fs::is_directory(d.dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(d.dir, ec))
      if (std::regex_match(entry.path().filename().string(), kSharedLibrary))
        files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& f : files) {
      try {
        load_library(f, d.origin, false);
      } catch (const HostError& e) {
        refused_.push_back({f, d.origin, e.what()});
      }
    }
  }
  // Several libraries providing one (kind, type): say which a job gets.
  std::vector<std::pair<rh_ComponentKind, std::string>> provided;
  for (const auto& p : plugins_)
    for (const Component& c : p->components)
      if (std::find(provided.begin(), provided.end(), std::make_pair(c.kind, c.type_name)) ==
          provided.end())
        provided.emplace_back(c.kind, c.type_name);
  for (const auto& [kind, type] : provided) {
    std::vector<std::string> providers;
    for (const auto& p : plugins_)
      for (const Component& c : p->components)
        if (c.kind == kind && c.type_name == type)
          providers.push_back(describe(p->path, p->origin));
    if (providers.size() < 2) continue;
    auto files = candidate_files(kind, type);
    std::string winner = files.empty()
                             ? "none of them is named " + plugin_file_name(kind, type) +
                                   ", so a job reaches them only with plugin:"
                             : "a job's `type: " + type + "` gets " +
                                   describe(files[0].first, files[0].second) + ", the first " +
                                   plugin_file_name(kind, type) + " in search order";
    std::vector<std::string> others(providers.begin() + 1, providers.end());
    warn_shadowed(kind, type, providers[0], others, winner);
  }
}

std::vector<std::pair<fs::path, std::string>> PluginRegistry::candidate_files(
    rh_ComponentKind kind, const std::string& type) const {
  std::vector<std::pair<fs::path, std::string>> files;
  std::vector<fs::path> seen;  // the same directory twice on the path is one candidate
  const std::string name = plugin_file_name(kind, type);
  for (const SearchDir& d : searched_) {
    std::error_code ec;
    fs::path file = d.dir / name;
    if (!fs::exists(file, ec)) continue;
    fs::path canonical = fs::weakly_canonical(file, ec);
    if (ec) canonical = file;
    if (std::find(seen.begin(), seen.end(), canonical) != seen.end()) continue;
    seen.push_back(canonical);
    files.emplace_back(file, d.origin);
  }
  return files;
}

void PluginRegistry::warn_shadowed(rh_ComponentKind kind, const std::string& type,
                                   const std::string& chosen,
                                   const std::vector<std::string>& others, const std::string& why) {
  if (others.empty() || !warned_.insert({kind, type}).second) return;
  std::string also;
  for (const std::string& o : others) also += (also.empty() ? "" : ", ") + o;
  spdlog::warn("{} '{}' is provided by {} and by {}: {}", kind_name(kind), type, chosen, also, why);
}

const Component* PluginRegistry::find(rh_ComponentKind kind, const std::string& type) {
  const std::string what = std::string(kind_name(kind)) + " '" + type + "'";
  if (!std::regex_match(type, type_name_pattern()))
    throw HostError(RH_ERROR_INVALID_CONFIG,
                    what +
                        ": not a valid type name (a letter or '_', then letters, digits, "
                        "'_', '.' or '-')");
  auto files = candidate_files(kind, type);

  // An explicit `plugin:` beats the search path.
  const Component* chosen = nullptr;
  std::vector<std::string> shadowed;
  for (const auto& p : plugins_) {
    if (!p->explicit_load) continue;
    for (const Component& c : p->components) {
      if (c.kind != kind || c.type_name != type) continue;
      if (chosen == nullptr)
        chosen = &c;
      else
        shadowed.push_back(describe(p->path, p->origin));
    }
  }
  if (chosen != nullptr) {
    for (const auto& [file, origin] : files) {
      std::error_code ec;
      if (!fs::equivalent(file, chosen->plugin->path, ec))
        shadowed.push_back(describe(file, origin));
    }
    warn_shadowed(kind, type, describe(chosen->plugin->path, chosen->plugin->origin), shadowed,
                  "a component naming a library with plugin: uses that one; `type: " + type +
                      "` alone gets the first, named by plugin: in the job");
    return chosen;
  }

  if (files.empty()) return nullptr;
  const auto& [file, origin] = files.front();
  Plugin* plugin = nullptr;
  try {
    plugin = &load_library(file, origin, false);
  } catch (const HostError& e) {
    throw HostError(e.code(), what + ": cannot use " + describe(file, origin) + ": " + e.what());
  }
  std::vector<std::string> provided;
  for (const Component& c : plugin->components) {
    if (c.kind == kind && c.type_name == type) chosen = &c;
    provided.push_back(std::string(kind_name(c.kind)) + " '" + c.type_name + "'");
  }
  if (chosen == nullptr) {
    std::string list;
    for (const std::string& p : provided) list += (list.empty() ? "" : ", ") + p;
    throw HostError(RH_ERROR_NOT_FOUND, describe(file, origin) + " is named for " + what +
                                            " but provides no " + what + " (it provides " + list +
                                            ")");
  }
  std::vector<std::string> later;
  for (size_t i = 1; i < files.size(); ++i)
    later.push_back(describe(files[i].first, files[i].second) + ", not loaded");
  warn_shadowed(kind, type, describe(file, origin), later, "using the first in search order");
  return chosen;
}

std::vector<std::string> PluginRegistry::type_names(rh_ComponentKind kind) const {
  std::vector<std::string> names;
  auto add = [&](const std::string& name) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  };
  for (const auto& p : plugins_)
    for (const Component& c : p->components)
      if (c.kind == kind) add(c.type_name);
  // What the file names promise, without opening anything.
  const std::string name = plugin_file_name(kind, "");
  const std::string prefix = name.substr(0, name.size() - 3);  // "librh_hook_"
  for (const SearchDir& d : searched_) {
    std::error_code ec;
    if (!fs::is_directory(d.dir, ec)) continue;
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(d.dir, ec)) {
      std::string file = entry.path().filename().string();
      if (file.size() > prefix.size() + 3 && file.compare(0, prefix.size(), prefix) == 0 &&
          file.compare(file.size() - 3, 3, ".so") == 0)
        found.push_back(file.substr(prefix.size(), file.size() - prefix.size() - 3));
    }
    std::sort(found.begin(), found.end());
    for (const std::string& t : found) add(t);
  }
  return names;
}

void PluginRegistry::initialize(Plugin& plugin) {
  if (plugin.initialized) return;
  if (plugin.init != nullptr) {
    rh_InitArgs args{RH_INIT_ARGS_STRUCT_SIZE, services_.api(),
                     services_.new_context(plugin.name, "")};
    std::string what = "plugin '" + plugin.name + "' (" + plugin.path.string() + ") Init";
    rh_Error* err = call_plugin(what, [&] { return plugin.init(&args); });
    if (err != nullptr) {
      std::unique_ptr<rh_Error> owned(err);
      throw HostError(owned->code, what + " failed: " + owned->message);
    }
  }
  plugin.initialized = true;
}

}  // namespace rh::host
