// Calls into plugin code with a last line of defence: a C++ exception that
// escapes through the C ABI (a plugin bug) is caught here and reported as an
// error naming the plugin, instead of tearing down the host.
#pragma once

#include <exception>
#include <string>

#include "plugins/HostError.hpp"

namespace rh::host {

// `what` names the call, e.g. "hook 'trace' (/x/librh_hook_trace.so) Create".
template <class Fn>
rh_Error* call_plugin(const std::string& what, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    return new_error(RH_ERROR_INTERNAL, what + " let a C++ exception escape through the C ABI " +
                                            "(a bug in the plugin): " + e.what());
  } catch (...) {
    return new_error(RH_ERROR_INTERNAL, what + " let an unknown C++ exception escape through " +
                                            "the C ABI (a bug in the plugin)");
  }
}

}  // namespace rh::host
