// The --list-plugins report.
#pragma once

#include <string>

namespace rh::host {
class PluginRegistry;
}

namespace rh::cli {

std::string list_plugins(const host::PluginRegistry& registry);

}  // namespace rh::cli
