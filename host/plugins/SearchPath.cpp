#include "plugins/SearchPath.hpp"

#include <sstream>

namespace fs = std::filesystem;

namespace rh::host {

fs::path install_plugin_dir(const fs::path& executable) {
  return executable.parent_path().parent_path() / RH_PLUGIN_INSTALL_RELDIR;
}

std::vector<SearchDir> plugin_search_dirs(const std::vector<std::string>& cli_paths,
                                          const char* env, const fs::path& executable) {
  std::vector<SearchDir> dirs;
  for (const std::string& p : cli_paths)
    if (!p.empty()) dirs.push_back({fs::absolute(p), "--plugin-path"});
  if (env != nullptr) {
    std::stringstream entries(env);
    std::string entry;
    while (std::getline(entries, entry, ':'))
      if (!entry.empty()) dirs.push_back({fs::absolute(entry), "RH_PLUGIN_PATH"});
  }
  if (!executable.empty()) dirs.push_back({install_plugin_dir(executable), "install"});
  return dirs;
}

}  // namespace rh::host
