// The plugin search path (docs/architecture.md §2 rule 8): --plugin-path directories,
// then RH_PLUGIN_PATH, then the install's plugin directory. Never the current
// directory implicitly: empty RH_PLUGIN_PATH entries (which many tools read as
// ".") are skipped, and a relative entry (".", "plugins") is resolved against
// the job file's directory, as a component's `plugin:` path is, so that the
// same job finds the same plugins from whatever directory it is started.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "abi/PluginRegistry.hpp"

namespace rh::host {

// `env` is RH_PLUGIN_PATH's value (nullptr when unset); `executable` the
// host's own path, from which <prefix>/lib/runner-host/plugins is derived;
// `job_dir` the directory of the job file (absolute), nullopt when the host
// runs without one (`--list-plugins` alone). Each relative entry resolved
// against it is logged at info with its origin. Throws HostError
// (RH_ERROR_INVALID_ARGUMENT) naming the entry and its origin for a relative
// entry when there is no job file.
std::vector<SearchDir> plugin_search_dirs(const std::vector<std::string>& cli_paths,
                                          const char* env, const std::filesystem::path& executable,
                                          const std::optional<std::filesystem::path>& job_dir);

// <prefix>/<plugin dir> for an executable at <prefix>/bin/runner-host.
std::filesystem::path install_plugin_dir(const std::filesystem::path& executable);

}  // namespace rh::host
