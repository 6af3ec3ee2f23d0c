#include "cli/PluginListing.hpp"

#include <filesystem>
#include <iomanip>
#include <sstream>

#include "abi/PluginRegistry.hpp"
#include "abi/TypeAliases.hpp"

namespace rh::cli {

std::string list_plugins(const host::PluginRegistry& registry) {
  std::ostringstream out;
  out << "Host: runner-host ABI " << RH_ABI_VERSION_MAJOR << "." << RH_ABI_VERSION_MINOR
      << ", native tag " << registry.host_tag().str() << "\n";
  out << "Plugin search path (in order):\n";
  for (const auto& d : registry.searched()) {
    std::error_code ec;
    out << "  " << std::left << std::setw(16) << d.origin << d.dir.string()
        << (std::filesystem::is_directory(d.dir, ec) ? "" : "  (missing)") << "\n";
  }
  out << "\nPlugins (" << registry.plugins().size() << " loaded, " << registry.refused().size()
      << " refused):\n";
  for (const auto& p : registry.plugins()) {
    out << p->path.string() << "  [" << p->origin << "]\n";
    out << "  plugin " << p->name << " " << p->version << ", ABI " << p->abi_major << "."
        << p->abi_minor << ", native tag " << p->tag.str() << "\n";
    for (const auto& c : p->components) {
      out << "  " << std::left << std::setw(14) << host::kind_name(c.kind) << std::setw(18)
          << c.type_name << c.description << "\n";
    }
  }
  for (const auto& r : registry.refused()) {
    out << r.path.string() << "  [" << r.origin << "]\n";
    out << "  REFUSED: " << r.reason << "\n";
  }
  // Other tools' type names, used when no plugin provides that name itself.
  out << "\nType aliases (used when no plugin provides the name):\n";
  for (const auto& a : host::type_aliases()) {
    out << "  " << std::left << std::setw(14) << host::kind_name(a.kind) << std::setw(22) << a.name
        << (a.target.empty() ? "refused: " + a.refusal
                             : "-> " + a.target + " (" + a.origin + " name)")
        << "\n";
  }
  return out.str();
}

}  // namespace rh::cli
