// The plugin search path (DESIGN.md §2 rule 8): --plugin-path directories,
// then RH_PLUGIN_PATH, then the install's plugin directory. Never the current
// directory implicitly: empty RH_PLUGIN_PATH entries (which many tools read as
// ".") are skipped.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "plugins/PluginRegistry.hpp"

namespace rh::host {

// `env` is RH_PLUGIN_PATH's value (nullptr when unset); `executable` the
// host's own path, from which <prefix>/lib/runner-host/plugins is derived.
std::vector<SearchDir> plugin_search_dirs(const std::vector<std::string>& cli_paths,
                                          const char* env, const std::filesystem::path& executable);

// <prefix>/<plugin dir> for an executable at <prefix>/bin/runner-host.
std::filesystem::path install_plugin_dir(const std::filesystem::path& executable);

}  // namespace rh::host
