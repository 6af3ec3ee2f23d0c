// Calls into plugin code with a last line of defence: a C++ exception that
// escapes through the C ABI (a plugin bug) is caught here and reported as an
// error naming the plugin, instead of tearing down the host.
#pragma once

#include <exception>
#include <string>

#include "abi/HostError.hpp"

namespace rh::host {

// The error for a C++ exception that escaped plugin code; call it only in a
// catch block (it rethrows the exception being handled to read it).
inline rh_Error* escaped_exception(const std::string& what) noexcept {
  try {
    throw;
  } catch (const std::exception& e) {
    return new_error(RH_ERROR_INTERNAL, what + " let a C++ exception escape through the C ABI " +
                                            "(a bug in the plugin): " + e.what());
  } catch (...) {
    return new_error(RH_ERROR_INTERNAL, what + " let an unknown C++ exception escape through " +
                                            "the C ABI (a bug in the plugin)");
  }
}

// `what` names the call, e.g. "hook 'trace' (/x/librh_hook_trace.so) Create".
template <class Fn>
rh_Error* call_plugin(const std::string& what, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (...) {
    return escaped_exception(what);
  }
}

// The same for the calls made every iteration: the name, `<what> <entry>`,
// is only built when the call fails.
template <class Fn>
rh_Error* call_plugin(const std::string& what, const char* entry, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (...) {
    return escaped_exception(what + " " + entry);
  }
}

}  // namespace rh::host
