// rh/cpp/config.hpp — typed access to a component's YAML subtree.
//
//   rh::Config cfg(host, args->config);
//   int64_t cap = cfg.get<int64_t>("bucket_cap_mb", 25);   // default when absent
//   std::string path = cfg.get<std::string>("path");        // required
//   rh::Config mp = cfg.child("mixed_precision");           // may be absent
//
// Every error (wrong type, missing key, bad value via cfg.error()) names the
// file, line, column and key path, because the host builds it.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "rh/cpp/error.hpp"
#include "rh/rh_host.h"

namespace rh {

class Config {
 public:
  Config(const rh_HostApi* host, const rh_ConfigNode* node) : host_(host), node_(node) {}

  // False for an absent child (child() of a missing key).
  bool present() const noexcept { return node_ != nullptr; }
  rh_ConfigKind kind() const { return node_ ? host_->Config_Kind(node_) : RH_CONFIG_NULL; }
  const rh_ConfigNode* node() const noexcept { return node_; }
  std::string path() const { return node_ ? to_string(host_->Config_Path(node_)) : ""; }
  std::string location() const { return node_ ? to_string(host_->Config_Location(node_)) : ""; }

  bool has(const std::string& key) const { return child(key).present(); }

  // The child at `key`; absent (present() == false) when there is none.
  Config child(const std::string& key) const {
    if (node_ == nullptr) return Config(host_, nullptr);
    return Config(host_, host_->Config_Get(node_, key.data(), key.size()));
  }

  size_t size() const { return node_ ? host_->Config_Size(node_) : 0; }
  Config at(size_t index) const { return Config(host_, host_->Config_At(node_, index)); }
  std::string key_at(size_t index) const { return to_string(host_->Config_KeyAt(node_, index)); }

  // The scalar value of this node as T (int64_t, int, double, bool, std::string).
  template <class T>
  T as() const {
    if (node_ == nullptr) throw Exception(RH_ERROR_INVALID_CONFIG, "as() on an absent node");
    if constexpr (std::is_same_v<T, bool>) {
      int32_t v = 0;
      check(host_, host_->Config_AsBool(node_, &v));
      return v != 0;
    } else if constexpr (std::is_integral_v<T>) {
      int64_t v = 0;
      check(host_, host_->Config_AsInt(node_, &v));
      if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
          v > static_cast<int64_t>(std::numeric_limits<T>::max()))
        throw_error("value " + std::to_string(v) + " is out of range");
      return static_cast<T>(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      double v = 0;
      check(host_, host_->Config_AsDouble(node_, &v));
      return static_cast<T>(v);
    } else {
      static_assert(std::is_same_v<T, std::string>, "unsupported config type");
      rh_StringView v{};
      check(host_, host_->Config_AsString(node_, &v));
      return to_string(v);
    }
  }

  // Required key: a missing key is an error naming this node's path.
  template <class T>
  T get(const std::string& key) const {
    Config c = child(key);
    if (!c.present() || c.kind() == RH_CONFIG_NULL)
      throw_error("missing required key '" + key + "'");
    return c.as<T>();
  }

  // Optional key with a default (also used when the value is null).
  template <class T>
  T get(const std::string& key, const T& fallback) const {
    Config c = child(key);
    if (!c.present() || c.kind() == RH_CONFIG_NULL) return fallback;
    return c.as<T>();
  }

  // An error about this node (file:line:col and key path prefixed by the host).
  rh_Error* error(const std::string& message) const {
    if (node_ == nullptr) return make_error(host_, RH_ERROR_INVALID_CONFIG, message);
    return host_->Config_Error(node_, message.data(), message.size());
  }
  [[noreturn]] void throw_error(const std::string& message) const {
    check(host_, error(message));
    throw Exception(RH_ERROR_INTERNAL, message);  // unreachable: check() throws
  }

 private:
  const rh_HostApi* host_;
  const rh_ConfigNode* node_;
};

}  // namespace rh
