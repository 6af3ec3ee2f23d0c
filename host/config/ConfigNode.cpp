#include "config/ConfigNode.hpp"

#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "config/ScalarSyntax.hpp"
#include "config/Suggest.hpp"

namespace rh::config {
namespace {

std::string error_text(const Location& where, const std::string& key_path,
                       const std::string& message) {
  std::string text = where.str();
  if (!key_path.empty()) text += (text.empty() ? "" : ": ") + key_path;
  if (!text.empty()) text += ": ";
  return text + message;
}

// A plain scalar that would have been the wanted type, had it not been quoted.
std::string quoted_hint(const Node& node, bool (*looks_right)(const std::string&)) {
  if (node.is_scalar() && node.quoted() && looks_right(node.scalar())) {
    return " (a quoted string; remove the quotes)";
  }
  return "";
}

bool is_int_or_float_text(const std::string& text) {
  return is_int_text(text) || is_float_text(text);
}

}  // namespace

std::string Location::str() const {
  if (line <= 0) return file;
  std::string text = file + ":" + std::to_string(line);
  if (column > 0) text += ":" + std::to_string(column);
  return text;
}

ConfigError::ConfigError(const Location& where, const std::string& key_path,
                         const std::string& message)
    : std::runtime_error(error_text(where, key_path, message)),
      where_(where),
      key_path_(key_path),
      message_(message) {}

// --- construction ------------------------------------------------------------

NodePtr Node::make_null(Location where) { return NodePtr(new Node(Kind::Null, std::move(where))); }

NodePtr Node::make_scalar(std::string text, bool quoted, Location where) {
  NodePtr node(new Node(Kind::Scalar, std::move(where)));
  node->text_ = std::move(text);
  node->quoted_ = quoted;
  return node;
}

NodePtr Node::make_sequence(Location where) {
  return NodePtr(new Node(Kind::Sequence, std::move(where)));
}

NodePtr Node::make_map(Location where) { return NodePtr(new Node(Kind::Map, std::move(where))); }

NodePtr Node::clone() const {
  NodePtr copy(new Node(kind_, where_));
  copy->path_ = path_;
  copy->text_ = text_;
  copy->quoted_ = quoted_;
  copy->key_locations_ = key_locations_;
  for (const auto& [key, value] : items_) copy->items_.emplace_back(key, value->clone());
  for (const auto& item : seq_) copy->seq_.push_back(item->clone());
  return copy;
}

void Node::set(const std::string& key, NodePtr value, Location key_where) {
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].first == key) {
      items_[i].second = std::move(value);
      key_locations_[i] = std::move(key_where);
      return;
    }
  }
  items_.emplace_back(key, std::move(value));
  key_locations_.push_back(std::move(key_where));
}

bool Node::erase(const std::string& key) {
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].first == key) {
      items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
      key_locations_.erase(key_locations_.begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  }
  return false;
}

void Node::append(NodePtr item) { seq_.push_back(std::move(item)); }

void Node::replace_item(size_t index, NodePtr item) { seq_.at(index) = std::move(item); }

void Node::assign_paths(const std::string& path) {
  path_ = path;
  const std::string prefix = path.empty() ? "" : path + ".";
  for (auto& [key, value] : items_) value->assign_paths(prefix + key);
  for (size_t i = 0; i < seq_.size(); ++i) seq_[i]->assign_paths(prefix + std::to_string(i));
}

void Node::relocate(const Location& where) {
  where_ = where;
  location_text_ = where_.str();
  for (auto& key_where : key_locations_) key_where = where;
  for (auto& item : items_) item.second->relocate(where);
  for (auto& item : seq_) item->relocate(where);
}

// --- reading -------------------------------------------------------------------

const Node* Node::find(const std::string& key) const { return get(key).get(); }

const Node* Node::find_path(const std::string& dotted, bool null_is_absent) const {
  const Node* n = this;
  size_t start = 0;
  while (n != nullptr) {
    const size_t dot = dotted.find('.', start);
    n = n->find(dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (n != nullptr && null_is_absent && n->is_null()) return nullptr;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return n;
}

NodePtr Node::get(const std::string& key) const {
  for (const auto& [name, value] : items_) {
    if (name == key) return value;
  }
  return nullptr;
}

const Node* Node::lookup(const std::string& key) const {
  record_lookup(key);
  return find(key);
}

const Location& Node::key_location(const std::string& key) const {
  for (size_t i = 0; i < items_.size(); ++i) {
    if (items_[i].first == key) return key_locations_[i];
  }
  return where_;
}

void Node::type_error(const std::string& expected) const {
  throw ConfigError(where_, path_, "expected " + expected + ", got " + describe_value());
}

int64_t Node::as_int() const {
  if (!is_scalar() || quoted_ || !is_int_text(text_)) {
    throw ConfigError(
        where_, path_,
        "expected an integer, got " + describe_value() + quoted_hint(*this, is_int_text));
  }
  const char* begin = text_.data() + (text_[0] == '+' ? 1 : 0);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(begin, text_.data() + text_.size(), value);
  if (ec != std::errc() || end != text_.data() + text_.size()) {
    throw ConfigError(
        where_, path_,
        "expected an integer, got " + describe_value() + " (out of the 64-bit range)");
  }
  return value;
}

double Node::as_double() const {
  if (!is_scalar() || quoted_ || !is_int_or_float_text(text_)) {
    throw ConfigError(
        where_, path_,
        "expected a number, got " + describe_value() + quoted_hint(*this, is_int_or_float_text));
  }
  const bool negative = text_[0] == '-';
  const std::string unsigned_text = (text_[0] == '-' || text_[0] == '+') ? text_.substr(1) : text_;
  if (unsigned_text == ".inf" || unsigned_text == ".Inf" || unsigned_text == ".INF") {
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  if (unsigned_text == ".nan" || unsigned_text == ".NaN" || unsigned_text == ".NAN") {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double value = 0;
  const char* end_of_text = unsigned_text.data() + unsigned_text.size();
  const auto [end, ec] = std::from_chars(unsigned_text.data(), end_of_text, value);
  if (ec != std::errc() || end != end_of_text) {
    throw ConfigError(where_, path_,
                      "expected a number, got " + describe_value() + " (out of the double range)");
  }
  return negative ? -value : value;
}

bool Node::as_bool() const {
  if (!is_scalar() || quoted_ || !is_bool_text(text_)) {
    throw ConfigError(
        where_, path_,
        "expected a boolean, got " + describe_value() + quoted_hint(*this, is_bool_text));
  }
  return text_[0] == 't' || text_[0] == 'T';
}

const std::string& Node::as_string() const {
  if (!is_scalar()) type_error("a string");
  return text_;
}

std::string Node::kind_name() const {
  switch (kind_) {
    case Kind::Null:
      return "null";
    case Kind::Sequence:
      return "a list";
    case Kind::Map:
      return "a map";
    case Kind::Scalar:
      break;
  }
  if (quoted_) return "a string";
  switch (resolve_plain_scalar(text_)) {
    case ScalarType::Null:
      return "null";
    case ScalarType::Integer:
      return "an integer";
    case ScalarType::Float:
      return "a number";
    case ScalarType::Boolean:
      return "a boolean";
    case ScalarType::String:
      break;
  }
  return "a string";
}

std::string Node::describe_value() const {
  if (is_scalar()) return "'" + text_ + "'";
  return kind_name();
}

// --- unknown keys of a plugin's subtree -----------------------------------------

namespace {

void collect_unknown(const Node& map, const std::set<std::string>* host_keys,
                     const std::string& what, std::vector<ConfigError>& errors);

void descend(const Node& node, const std::string& what, std::vector<ConfigError>& errors) {
  if (node.is_map()) {
    collect_unknown(node, nullptr, what, errors);
  } else if (node.is_sequence()) {
    for (const auto& item : node.seq_items()) descend(*item, what, errors);
  }
}

void collect_unknown(const Node& map, const std::set<std::string>* host_keys,
                     const std::string& what, std::vector<ConfigError>& errors) {
  std::vector<std::string> candidates(map.lookups().begin(), map.lookups().end());
  if (host_keys != nullptr)
    candidates.insert(candidates.end(), host_keys->begin(), host_keys->end());
  for (const auto& [key, value] : map.map_items()) {
    if (map.lookups().count(key) != 0) {
      descend(*value, what, errors);
      continue;
    }
    if (host_keys != nullptr && host_keys->count(key) != 0) continue;
    std::string message = "unknown key for " + what;
    const std::string hint = suggest(key, candidates);
    if (!hint.empty()) message += " (did you mean '" + hint + "'?)";
    errors.emplace_back(map.key_location(key), value->path(), message);
  }
}

}  // namespace

std::vector<ConfigError> unknown_keys(const Node& component, const std::set<std::string>& host_keys,
                                      const std::string& what) {
  std::vector<ConfigError> errors;
  if (component.is_map()) collect_unknown(component, &host_keys, what, errors);
  return errors;
}

}  // namespace rh::config
