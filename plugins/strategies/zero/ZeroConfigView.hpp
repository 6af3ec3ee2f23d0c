// How the zero strategy's configuration reader sees its two sources (internal
// to rh_zero_core): one View interface over a node of the job's `strategy:`
// map (YAML through the host's rh::Config, whose type errors come located)
// and over a node of a DeepSpeed JSON file (formats/Json, which keeps each
// value's line and column), so that one validator (ZeroConfig.cpp) gives
// both the same rules and the same messages, each naming where the value
// was written: "job.yaml:4:12: strategy.zero_optimization.stage: ..." or
// "ds.json:3:14: zero_optimization.stage: ...". No LibTorch here.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "rh/cpp/config.hpp"

namespace rh::json {
struct Value;
}  // namespace rh::json

namespace rh::zero {
namespace detail {

// Throws rh::Exception (RH_ERROR_INVALID_CONFIG): "<where>: <message>".
[[noreturn]] void fail_text(const std::string& where, const std::string& message);

// One node of either source, as the validator reads it.
class View {
 public:
  virtual ~View() = default;
  virtual bool is_null() const = 0;
  virtual bool is_map() const = 0;
  virtual bool is_sequence() const = 0;
  virtual std::vector<std::string> keys() const = 0;
  // Item `i` of a sequence (i < size()).
  virtual size_t size() const = 0;
  virtual std::unique_ptr<View> item(size_t i) const = 0;
  // The child at `key` (which keys() listed).
  virtual std::unique_ptr<View> child(const std::string& key) const = 0;
  // Where the key itself was written, for errors about the key.
  virtual std::string key_where(const std::string& key) const { return child(key)->where(); }
  virtual bool as_bool() const = 0;
  virtual double as_number() const = 0;
  virtual std::string as_string() const = 0;
  // DeepSpeed's "auto" (a string in JSON, a plain scalar in YAML).
  virtual bool is_auto() const = 0;
  // The value as written, for messages: true, 2, 'cpu', a map.
  virtual std::string written() const = 0;
  // "file:line:col: key.path"
  virtual std::string where() const = 0;
  // True for the JSON file (changes how unknown keys are phrased).
  virtual bool from_file() const = 0;

  [[noreturn]] void fail(const std::string& message) const { fail_text(where(), message); }
};

// The job's `strategy:` map (or any node of it).
std::unique_ptr<View> job_view(const rh::Config& node);

// A DeepSpeed JSON document, parsed: its root object as a View. Throws
// rh::Exception (RH_ERROR_INVALID_CONFIG) naming file:line:column when the
// text is not valid JSON or its root is not an object.
class DeepSpeedJson {
 public:
  DeepSpeedJson(const std::string& text, const std::string& file);
  ~DeepSpeedJson();
  DeepSpeedJson(const DeepSpeedJson&) = delete;
  DeepSpeedJson& operator=(const DeepSpeedJson&) = delete;
  const View& root() const { return *view_; }

 private:
  std::unique_ptr<json::Value> value_;
  std::unique_ptr<View> view_;
};

}  // namespace detail
}  // namespace rh::zero
