// rh/cpp/error.hpp — C++ side of rh_Error: an exception type for plugin code,
// RAII for errors received from the host, and the try/catch trampoline that
// keeps every C++ exception on the plugin's side of the C ABI.
#pragma once

#include <exception>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "rh/rh_host.h"

namespace rh {

// Thrown by plugin code (and by these helpers) to report an error with a
// code; guard() turns it into an rh_Error with the same code and message.
class Exception : public std::runtime_error {
 public:
  Exception(rh_ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  rh_ErrorCode code() const noexcept { return code_; }

 private:
  rh_ErrorCode code_;
};

// Owns an rh_Error received from the host; destroys it through the table.
class ErrorPtr {
 public:
  ErrorPtr() = default;
  ErrorPtr(const rh_HostApi* host, rh_Error* error) : host_(host), error_(error) {}
  ErrorPtr(ErrorPtr&& other) noexcept : host_(other.host_), error_(other.release()) {}
  ErrorPtr& operator=(ErrorPtr&& other) noexcept {
    reset();
    host_ = other.host_;
    error_ = other.release();
    return *this;
  }
  ErrorPtr(const ErrorPtr&) = delete;
  ErrorPtr& operator=(const ErrorPtr&) = delete;
  ~ErrorPtr() { reset(); }

  explicit operator bool() const noexcept { return error_ != nullptr; }
  rh_Error* get() const noexcept { return error_; }
  rh_Error* release() noexcept {
    rh_Error* e = error_;
    error_ = nullptr;
    return e;
  }
  void reset() noexcept {
    if (error_ != nullptr) host_->Error_Destroy(error_);
    error_ = nullptr;
  }
  rh_ErrorCode code() const { return host_->Error_Code(error_); }
  std::string message() const {
    rh_StringView m = host_->Error_Message(error_);
    return std::string(m.data, m.size);
  }

 private:
  const rh_HostApi* host_ = nullptr;
  rh_Error* error_ = nullptr;
};

// Throws rh::Exception for a non-NULL error returned by a host function
// (taking ownership of it); does nothing for NULL.
inline void check(const rh_HostApi* host, rh_Error* error) {
  if (error == nullptr) return;
  ErrorPtr owned(host, error);
  throw Exception(owned.code(), owned.message());
}

inline rh_Error* make_error(const rh_HostApi* host, rh_ErrorCode code, const std::string& message) {
  return host->Error_Create(code, message.data(), message.size());
}

// Runs fn() and converts any exception into an rh_Error owned by the caller:
// the trampoline every extern "C" entry of a C++ plugin goes through.
// (No std::string is built in the handlers: out of memory there would end
// the program.)
template <class Fn>
rh_Error* guard(const rh_HostApi* host, Fn&& fn) noexcept {
  auto error = [host](rh_ErrorCode code, const char* what) {
    return host->Error_Create(code, what, std::char_traits<char>::length(what));
  };
  try {
    fn();
    return nullptr;
  } catch (const Exception& e) {
    return error(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return error(RH_ERROR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return error(RH_ERROR_INTERNAL, e.what());
  } catch (...) {
    return error(RH_ERROR_INTERNAL, "unknown C++ exception");
  }
}

inline std::string to_string(rh_StringView s) { return std::string(s.data, s.size); }

}  // namespace rh
