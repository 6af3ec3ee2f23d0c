// The host's side of rh_Error: the object behind the opaque pointer, and the
// C++ exception the host uses internally for errors that carry a code.
#pragma once

#include <stdexcept>
#include <string>

#include "rh/rh_abi.h"

struct rh_Error {
  rh_ErrorCode code;
  std::string message;
};

namespace rh::host {

// An error with an rh_ErrorCode, thrown inside the host.
class HostError : public std::runtime_error {
 public:
  HostError(rh_ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  rh_ErrorCode code() const noexcept { return code_; }

 private:
  rh_ErrorCode code_;
};

// Never returns NULL.
rh_Error* new_error(rh_ErrorCode code, std::string message);

// Takes ownership of `error` (may be NULL) and throws it as a HostError whose
// message is `context + ": " + message`.
void throw_if_error(rh_Error* error, const std::string& context);

// Runs the body of a C entry point (`fn` returns rh_Error*) so that no C++
// exception crosses the ABI: a HostError keeps its code, anything else
// becomes RH_ERROR_INTERNAL prefixed with `what` (the entry's name).
template <class Fn>
rh_Error* guard_entry(const char* what, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const HostError& e) {
    return new_error(e.code(), e.what());
  } catch (const std::exception& e) {
    return new_error(RH_ERROR_INTERNAL, std::string(what) + ": " + e.what());
  } catch (...) {
    return new_error(RH_ERROR_INTERNAL, std::string(what) + ": unknown exception");
  }
}

}  // namespace rh::host
