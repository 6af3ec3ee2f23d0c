#include "ZeroConfigView.hpp"

#include <cstdlib>
#include <utility>

#include "formats/Json.hpp"

namespace rh::zero::detail {

namespace json = rh::json;

void fail_text(const std::string& where, const std::string& message) {
  throw rh::Exception(RH_ERROR_INVALID_CONFIG, where + ": " + message);
}

namespace {

const char kAutoHint[] =
    " ('auto' is a placeholder Hugging Face's Trainer fills in; DeepSpeed itself does not "
    "accept it: write the value)";

// The job's YAML through the host: type errors come from the host, located.
class ConfigView : public View {
 public:
  explicit ConfigView(rh::Config c) : c_(c) {}
  bool is_null() const override { return c_.kind() == RH_CONFIG_NULL; }
  bool is_map() const override { return c_.kind() == RH_CONFIG_MAP; }
  bool is_sequence() const override { return c_.kind() == RH_CONFIG_SEQUENCE; }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (size_t i = 0; i < c_.size(); ++i) out.push_back(c_.key_at(i));
    return out;
  }
  size_t size() const override { return c_.size(); }
  std::unique_ptr<View> item(size_t i) const override {
    return std::make_unique<ConfigView>(c_.at(i));
  }
  std::unique_ptr<View> child(const std::string& key) const override {
    return std::make_unique<ConfigView>(c_.child(key));
  }
  bool as_bool() const override {
    reject_auto("a boolean");
    return c_.as<bool>();
  }
  double as_number() const override {
    reject_auto("a number");
    return c_.as<double>();
  }
  std::string as_string() const override { return c_.as<std::string>(); }
  bool is_auto() const override {
    return c_.kind() == RH_CONFIG_SCALAR && c_.as<std::string>() == "auto";
  }
  std::string written() const override {
    switch (c_.kind()) {
      case RH_CONFIG_SCALAR:
        return c_.as<std::string>();
      case RH_CONFIG_MAP:
        return "a map";
      case RH_CONFIG_SEQUENCE:
        return "a list";
      default:
        return "null";
    }
  }
  std::string where() const override { return c_.location() + ": " + c_.path(); }
  bool from_file() const override { return false; }

 private:
  void reject_auto(const char* expected) const {
    if (c_.kind() == RH_CONFIG_SCALAR && c_.as<std::string>() == "auto")
      fail(std::string("expected ") + expected + ", got 'auto'" + kAutoHint);
  }
  rh::Config c_;
};

class JsonView : public View {
 public:
  JsonView(const json::Value& v, std::string file, std::string path)
      : v_(v), file_(std::move(file)), path_(std::move(path)) {}
  bool is_null() const override { return v_.kind == json::Value::Kind::Null; }
  bool is_map() const override { return v_.kind == json::Value::Kind::Object; }
  bool is_sequence() const override { return v_.kind == json::Value::Kind::Array; }
  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (const auto& m : v_.members) out.push_back(m.key);
    return out;
  }
  size_t size() const override { return v_.items.size(); }
  std::unique_ptr<View> item(size_t i) const override {
    return std::make_unique<JsonView>(v_.items[i], file_, child_path(std::to_string(i)));
  }
  std::unique_ptr<View> child(const std::string& key) const override {
    return std::make_unique<JsonView>(*v_.find(key), file_, child_path(key));
  }
  std::string key_where(const std::string& key) const override {
    for (const auto& m : v_.members)
      if (m.key == key) return position(m.at.line, m.at.column) + ": " + child_path(key);
    return where();
  }
  bool as_bool() const override {
    if (v_.kind != json::Value::Kind::Bool) type_error("a boolean");
    return v_.boolean;
  }
  double as_number() const override {
    if (v_.kind != json::Value::Kind::Number) type_error("a number");
    return std::strtod(v_.text.c_str(), nullptr);
  }
  std::string as_string() const override {
    if (v_.kind != json::Value::Kind::String) type_error("a string");
    return v_.text;
  }
  bool is_auto() const override {
    return v_.kind == json::Value::Kind::String && v_.text == "auto";
  }
  std::string written() const override {
    switch (v_.kind) {
      case json::Value::Kind::Bool:
        return v_.boolean ? "true" : "false";
      case json::Value::Kind::Number:
        return v_.text;
      case json::Value::Kind::String:
        return "\"" + v_.text + "\"";
      default:
        return v_.kind_name();
    }
  }
  std::string where() const override { return position(v_.at.line, v_.at.column) + ": " + path_; }
  bool from_file() const override { return true; }

 private:
  std::string child_path(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  std::string position(int line, int column) const {
    return file_ + ":" + std::to_string(line) + ":" + std::to_string(column);
  }
  [[noreturn]] void type_error(const char* expected) const {
    std::string got = v_.kind_name();
    if (v_.kind == json::Value::Kind::String) got += " \"" + v_.text + "\"";
    if (v_.kind == json::Value::Kind::Number) got += " " + v_.text;
    if (v_.kind == json::Value::Kind::Bool) got += v_.boolean ? " true" : " false";
    fail(std::string("expected ") + expected + ", got " + got +
         (v_.kind == json::Value::Kind::String && v_.text == "auto" ? kAutoHint : ""));
  }
  const json::Value& v_;
  std::string file_;
  std::string path_;
};

}  // namespace

std::unique_ptr<View> job_view(const rh::Config& node) {
  return std::make_unique<ConfigView>(node);
}

DeepSpeedJson::DeepSpeedJson(const std::string& text, const std::string& file) {
  value_ = std::make_unique<json::Value>();
  try {
    *value_ = json::parse(text);
  } catch (const json::ParseError& e) {
    // DeepSpeed's loader falls back to Hjson, which has comments: say why
    // runner-host does not.
    std::string message = e.message();
    const std::string comments = "comments are not JSON (";
    if (message.compare(0, comments.size(), comments) == 0)
      message.insert(comments.size(), "DeepSpeed also reads Hjson; ");
    throw rh::Exception(RH_ERROR_INVALID_CONFIG,
                        file + ":" + e.at().str() + ": not valid JSON: " + message);
  }
  view_ = std::make_unique<JsonView>(*value_, file, "");
  if (!view_->is_map())
    fail_text(file + ":" + value_->at.str(),
              std::string("a DeepSpeed config must be a JSON object, got ") + value_->kind_name());
}

DeepSpeedJson::~DeepSpeedJson() = default;

}  // namespace rh::zero::detail
