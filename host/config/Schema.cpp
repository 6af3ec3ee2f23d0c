#include "config/Schema.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "config/ScalarSyntax.hpp"
#include "config/Suggest.hpp"

namespace rh::config {

struct Schema::Impl {
  enum class Kind {
    Integer,
    Number,
    Boolean,
    String,
    Enumeration,
    Any,
    List,
    Map,
    OneOf,
    Nullable,
    TypedUnion
  };

  explicit Impl(Kind k) : kind(k) {}

  Kind kind;
  std::optional<int64_t> int_min, int_max;       // Integer
  std::optional<double> number_min, number_max;  // Number
  bool min_exclusive = false;                    // Number
  std::vector<std::string> choices;              // Enumeration
  std::vector<Schema> children;                  // List item, Nullable inner, OneOf alternatives
  std::vector<schema::Field> fields;             // Map
  bool open = false;                             // Map
  std::string expected;                          // OneOf
  std::string key, what;                         // TypedUnion
  std::map<std::string, Schema> by_type;         // TypedUnion
};

namespace {

using Impl = Schema::Impl;
using Kind = Schema::Impl::Kind;

Schema make(Impl impl) { return Schema(std::make_shared<const Impl>(std::move(impl))); }

std::string join(const std::vector<std::string>& words, const std::string& separator) {
  std::string text;
  for (size_t i = 0; i < words.size(); ++i) text += (i > 0 ? separator : "") + words[i];
  return text;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string hint = suggest(word, candidates);
  return hint.empty() ? "" : " (did you mean '" + hint + "'?)";
}

// Shortest text that reads back as `value`: 0, 1, 0.5, 1e-08.
std::string format_number(double value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::vector<std::string> field_names(const Impl& map) {
  std::vector<std::string> names;
  for (const auto& field : map.fields) names.push_back(field.name);
  return names;
}

const schema::Field* find_field(const Impl& map, const std::string& name) {
  for (const auto& field : map.fields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

// How well `node`'s shape fits `schema`, for one_of(): 2 = the kind it wants,
// 1 = acceptable (a number where a string is wanted), 0 = not at all.
int shape_score(const Node& node, const Impl& schema) {
  const bool plain = node.is_scalar() && !node.quoted();
  switch (schema.kind) {
    case Kind::Integer:
      return plain && is_int_text(node.scalar()) ? 2 : 0;
    case Kind::Number:
      return plain && (is_int_text(node.scalar()) || is_float_text(node.scalar())) ? 2 : 0;
    case Kind::Boolean:
      return plain && is_bool_text(node.scalar()) ? 2 : 0;
    case Kind::String:
    case Kind::Enumeration:
      if (!node.is_scalar()) return 0;
      return node.kind_name() == "a string" ? 2 : 1;
    case Kind::Any:
      return 1;
    case Kind::List:
      return node.is_sequence() ? 2 : 0;
    case Kind::Map:
    case Kind::TypedUnion:
      return node.is_map() ? 2 : 0;
    case Kind::Nullable:
      return node.is_null() ? 2 : shape_score(node, schema.children.front().impl());
    case Kind::OneOf: {
      int best = 0;
      for (const auto& alternative : schema.children) {
        best = std::max(best, shape_score(node, alternative.impl()));
      }
      return best;
    }
  }
  return 0;
}

class Validator {
 public:
  explicit Validator(std::vector<ConfigError>& errors) : errors_(errors) {}

  void check(const Node& node, const Schema& schema) {
    const Impl& s = schema.impl();
    switch (s.kind) {
      case Kind::Integer:
        return check_integer(node, s);
      case Kind::Number:
        return check_number(node, s);
      case Kind::Boolean:
        return attempt([&] { node.as_bool(); });
      case Kind::String:
        return attempt([&] { node.as_string(); });
      case Kind::Enumeration:
        return check_enumeration(node, s);
      case Kind::Any:
        return;
      case Kind::List:
        if (!node.is_sequence()) return expected(node, schema);
        for (const auto& item : node.seq_items()) check(*item, s.children.front());
        return;
      case Kind::Map:
        return check_map(node, schema, nullptr);
      case Kind::OneOf:
        return check_one_of(node, schema);
      case Kind::Nullable:
        if (!node.is_null()) check(node, s.children.front());
        return;
      case Kind::TypedUnion:
        return check_typed_union(node, schema);
    }
  }

 private:
  template <typename Read>
  void attempt(Read read) {
    try {
      read();
    } catch (const ConfigError& e) {
      errors_.push_back(e);
    }
  }

  void error(const Node& node, const std::string& message) {
    errors_.emplace_back(node.location(), node.path(), message);
  }

  void expected(const Node& node, const Schema& schema) {
    error(node, "expected " + schema.describe() + ", got " + node.describe_value());
  }

  void check_integer(const Node& node, const Impl& s) {
    int64_t value = 0;
    try {
      value = node.as_int();
    } catch (const ConfigError& e) {
      errors_.push_back(e);
      return;
    }
    if (s.int_min && value < *s.int_min) {
      error(node, "must be >= " + std::to_string(*s.int_min) + ", got " + node.scalar());
    } else if (s.int_max && value > *s.int_max) {
      error(node, "must be <= " + std::to_string(*s.int_max) + ", got " + node.scalar());
    }
  }

  void check_number(const Node& node, const Impl& s) {
    double value = 0;
    try {
      value = node.as_double();
    } catch (const ConfigError& e) {
      errors_.push_back(e);
      return;
    }
    // Written so that NaN fails every bound.
    if (s.number_min && s.min_exclusive && !(value > *s.number_min)) {
      error(node, "must be > " + format_number(*s.number_min) + ", got " + node.scalar());
    } else if (s.number_min && !s.min_exclusive && !(value >= *s.number_min)) {
      error(node, "must be >= " + format_number(*s.number_min) + ", got " + node.scalar());
    } else if (s.number_max && !(value <= *s.number_max)) {
      error(node, "must be <= " + format_number(*s.number_max) + ", got " + node.scalar());
    }
  }

  void check_enumeration(const Node& node, const Impl& s) {
    const std::string choices = join(s.choices, ", ");
    if (!node.is_scalar()) {
      return error(node, "expected one of " + choices + ", got " + node.describe_value());
    }
    if (std::find(s.choices.begin(), s.choices.end(), node.scalar()) != s.choices.end()) return;
    error(node, "expected one of " + choices + ", got " + node.describe_value() +
                    did_you_mean(node.scalar(), s.choices));
  }

  // `selector_key`: the typed_union key, known and required in addition to the fields.
  void check_map(const Node& node, const Schema& schema, const std::string* selector_key) {
    const Impl& s = schema.impl();
    if (!node.is_map()) return expected(node, schema);
    for (const auto& field : s.fields) {
      if (field.required && node.find(field.name) == nullptr) {
        error(node, "missing required key '" + field.name + "'");
      }
    }
    std::vector<std::string> known = field_names(s);
    if (selector_key != nullptr) known.push_back(*selector_key);
    for (const auto& [key, value] : node.map_items()) {
      if (const schema::Field* field = find_field(s, key)) {
        check(*value, field->schema);
      } else if (selector_key != nullptr && key == *selector_key) {
        continue;
      } else if (!s.open) {
        errors_.emplace_back(node.key_location(key), value->path(),
                             "unknown key" + did_you_mean(key, known));
      }
    }
  }

  void check_one_of(const Node& node, const Schema& schema) {
    const Impl& s = schema.impl();
    std::vector<std::vector<ConfigError>> failures;
    for (const auto& alternative : s.children) {
      std::vector<ConfigError> errors;
      Validator(errors).check(node, alternative);
      if (errors.empty()) return;
      failures.push_back(std::move(errors));
    }
    // Exactly one alternative of the value's shape: its errors say more than "expected ...".
    int matches = 0;
    size_t match = 0;
    for (size_t i = 0; i < s.children.size(); ++i) {
      if (shape_score(node, s.children[i].impl()) == 2) {
        ++matches;
        match = i;
      }
    }
    if (matches == 1) {
      errors_.insert(errors_.end(), failures[match].begin(), failures[match].end());
    } else {
      expected(node, schema);
    }
  }

  void check_typed_union(const Node& node, const Schema& schema) {
    const Impl& s = schema.impl();
    if (!node.is_map()) return expected(node, schema);
    const Node* selector = node.find(s.key);
    if (selector == nullptr) return error(node, "missing required key '" + s.key + "'");
    if (!selector->is_scalar()) {
      return error(*selector, "expected a string, got " + selector->describe_value());
    }
    const auto chosen = s.by_type.find(selector->scalar());
    if (chosen == s.by_type.end()) {
      std::vector<std::string> types;
      for (const auto& entry : s.by_type) types.push_back(entry.first);
      return error(*selector, "unknown " + s.what + " type '" + selector->scalar() +
                                  "'; choices: " + join(types, ", ") +
                                  did_you_mean(selector->scalar(), types));
    }
    if (chosen->second.impl().kind == Kind::Map) {
      check_map(node, chosen->second, &s.key);
    } else {
      check(node, chosen->second);
    }
  }

  std::vector<ConfigError>& errors_;
};

}  // namespace

Schema::Schema() : Schema(schema::any()) {}

Schema::Schema(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

std::string Schema::describe() const {
  switch (impl_->kind) {
    case Kind::Integer:
      return "an integer";
    case Kind::Number:
      return "a number";
    case Kind::Boolean:
      return "a boolean";
    case Kind::String:
      return "a string";
    case Kind::Enumeration:
      return "one of " + join(impl_->choices, ", ");
    case Kind::Any:
      return "anything";
    case Kind::List:
      return "a list";
    case Kind::Map:
    case Kind::TypedUnion:
      return "a map";
    case Kind::OneOf:
      return impl_->expected;
    case Kind::Nullable:
      return impl_->children.front().describe() + " or null";
  }
  return "anything";
}

namespace schema {

Schema integer(std::optional<int64_t> min, std::optional<int64_t> max) {
  Impl impl(Kind::Integer);
  impl.int_min = min;
  impl.int_max = max;
  return make(std::move(impl));
}

Schema number(std::optional<double> min, std::optional<double> max) {
  Impl impl(Kind::Number);
  impl.number_min = min;
  impl.number_max = max;
  return make(std::move(impl));
}

Schema number_above(double exclusive_min, std::optional<double> max) {
  Impl impl(Kind::Number);
  impl.number_min = exclusive_min;
  impl.min_exclusive = true;
  impl.number_max = max;
  return make(std::move(impl));
}

Schema boolean() { return make(Impl(Kind::Boolean)); }

Schema string() { return make(Impl(Kind::String)); }

Schema enumeration(std::vector<std::string> choices) {
  Impl impl(Kind::Enumeration);
  impl.choices = std::move(choices);
  return make(std::move(impl));
}

Schema any() {
  // Shared: Schema() default-constructs through here, so this must not recurse.
  static const auto kAny = std::make_shared<const Impl>(Kind::Any);
  return Schema(kAny);
}

Schema list(Schema item) {
  Impl impl(Kind::List);
  impl.children.push_back(std::move(item));
  return make(std::move(impl));
}

Schema map(std::vector<Field> fields) {
  Impl impl(Kind::Map);
  impl.fields = std::move(fields);
  return make(std::move(impl));
}

Schema open_map(std::vector<Field> fields) {
  Impl impl(Kind::Map);
  impl.fields = std::move(fields);
  impl.open = true;
  return make(std::move(impl));
}

Schema one_of(std::vector<Schema> alternatives, std::string expected) {
  Impl impl(Kind::OneOf);
  impl.children = std::move(alternatives);
  impl.expected = std::move(expected);
  return make(std::move(impl));
}

Schema nullable(Schema s) {
  Impl impl(Kind::Nullable);
  impl.children.push_back(std::move(s));
  return make(std::move(impl));
}

const std::vector<std::pair<std::string, int>>& priority_levels() {
  // MMEngine's levels: a lower value runs earlier.
  static const std::vector<std::pair<std::string, int>> kLevels = {
      {"HIGHEST", 0},       {"VERY_HIGH", 10}, {"HIGH", 30},
      {"ABOVE_NORMAL", 40}, {"NORMAL", 50},    {"BELOW_NORMAL", 60},
      {"LOW", 70},          {"VERY_LOW", 90},  {"LOWEST", 100}};
  return kLevels;
}

Schema plugin_spec(bool with_priority) {
  std::vector<Field> fields = {
      {"type", string(), true, "the plugin's registered type name"},
      {"plugin", string(), false, "path of the shared library (default: search the plugin dirs)"},
  };
  if (with_priority) {
    std::vector<std::string> names;
    for (const auto& level : priority_levels()) names.push_back(level.first);
    fields.push_back({"priority",
                      one_of({integer(0, 100), enumeration(names)},
                             "an integer 0..100 or one of " + join(names, ", ")),
                      false, "0 (runs first) .. 100 (runs last), or a named level"});
    fields.push_back({"on_error", enumeration({"stop", "warn"}), false,
                      "a failing hook stops the run (default) or is logged and skipped"});
  }
  return open_map(std::move(fields));
}

Schema typed_union(std::string key, std::map<std::string, Schema> by_type, std::string what) {
  Impl impl(Kind::TypedUnion);
  impl.key = std::move(key);
  impl.by_type = std::move(by_type);
  impl.what = std::move(what);
  return make(std::move(impl));
}

}  // namespace schema

std::vector<ConfigError> validate(const Node& root, const Schema& schema) {
  std::vector<ConfigError> errors;
  Validator(errors).check(root, schema);
  return errors;
}

namespace {

void collect_keys(const Schema& schema, const std::string& prefix, const std::string& variant,
                  std::vector<SchemaKey>& out, std::map<std::string, size_t>& index) {
  using Kind = Schema::Impl::Kind;
  const Schema::Impl& impl = schema.impl();
  auto add = [&](const std::string& path, const std::string& doc) {
    const auto found = index.find(path);
    if (found == index.end()) {
      index[path] = out.size();
      out.push_back({path, doc, variant});
      return;
    }
    SchemaKey& key = out[found->second];
    if (key.doc.empty()) key.doc = doc;
    if (!key.variants.empty() && !variant.empty() &&
        key.variants.find(variant) == std::string::npos)
      key.variants += ", " + variant;
    if (variant.empty()) key.variants.clear();
  };
  switch (impl.kind) {
    case Kind::Map:
      for (const schema::Field& f : impl.fields) {
        const std::string path = prefix.empty() ? f.name : prefix + "." + f.name;
        add(path, f.doc);
        collect_keys(f.schema, path, variant, out, index);
      }
      break;
    case Kind::List:
      for (const Schema& item : impl.children)
        collect_keys(item, prefix + "[]", variant, out, index);
      break;
    case Kind::OneOf:
    case Kind::Nullable:
      for (const Schema& child : impl.children) collect_keys(child, prefix, variant, out, index);
      break;
    case Kind::TypedUnion: {
      add(prefix.empty() ? impl.key : prefix + "." + impl.key, "");
      for (const auto& [type, child] : impl.by_type)
        collect_keys(child, prefix, variant.empty() ? type : variant, out, index);
      break;
    }
    default:
      break;
  }
}

}  // namespace

std::vector<SchemaKey> schema_keys(const Schema& schema) {
  std::vector<SchemaKey> out;
  std::map<std::string, size_t> index;
  collect_keys(schema, "", "", out, index);
  return out;
}

}  // namespace rh::config
