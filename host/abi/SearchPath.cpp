#include "abi/SearchPath.hpp"

#include <spdlog/spdlog.h>

#include <sstream>

#include "abi/HostError.hpp"

namespace fs = std::filesystem;

namespace rh::host {

namespace {

// An absolute entry as given; a relative one against the job file's directory.
SearchDir resolve_entry(const std::string& entry, const std::string& origin,
                        const std::optional<fs::path>& job_dir) {
  fs::path path(entry);
  if (path.is_absolute()) return {path.lexically_normal(), origin};
  if (!job_dir) {
    throw HostError(RH_ERROR_INVALID_ARGUMENT,
                    origin + " entry '" + entry +
                        "' is a relative directory and there is no job file to resolve it "
                        "against (relative plugin directories are relative to the job file's "
                        "directory, never the current directory): give an absolute path");
  }
  fs::path resolved = (*job_dir / path).lexically_normal();
  // "jobs/." normalises to "jobs/": drop the trailing separator for messages.
  if (resolved.filename().empty()) resolved = resolved.parent_path();
  spdlog::info("plugin search directory {} ({} entry '{}', relative to the job file's directory)",
               resolved.string(), origin, entry);
  return {resolved, origin};
}

}  // namespace

fs::path install_plugin_dir(const fs::path& executable) {
  return executable.parent_path().parent_path() / RH_PLUGIN_INSTALL_RELDIR;
}

std::vector<SearchDir> plugin_search_dirs(const std::vector<std::string>& cli_paths,
                                          const char* env, const fs::path& executable,
                                          const std::optional<fs::path>& job_dir) {
  std::vector<SearchDir> dirs;
  for (const std::string& p : cli_paths)
    if (!p.empty()) dirs.push_back(resolve_entry(p, "--plugin-path", job_dir));
  if (env != nullptr) {
    std::stringstream entries(env);
    std::string entry;
    while (std::getline(entries, entry, ':'))
      if (!entry.empty()) dirs.push_back(resolve_entry(entry, "RH_PLUGIN_PATH", job_dir));
  }
  if (!executable.empty()) dirs.push_back({install_plugin_dir(executable), "install"});
  return dirs;
}

}  // namespace rh::host
