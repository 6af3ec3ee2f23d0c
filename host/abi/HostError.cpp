#include "abi/HostError.hpp"

#include <memory>

namespace rh::host {

rh_Error* new_error(rh_ErrorCode code, std::string message) {
  return new rh_Error{code, std::move(message)};
}

void throw_if_error(rh_Error* error, const std::string& context) {
  if (error == nullptr) return;
  std::unique_ptr<rh_Error> owned(error);
  throw HostError(owned->code, context.empty() ? owned->message : context + ": " + owned->message);
}

}  // namespace rh::host
