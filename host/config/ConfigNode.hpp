// The job configuration tree: what the YAML files and --set overrides say,
// with the place each value came from.
//
// The loader (JobLoader) builds one tree per job; the validator (Schema)
// checks the keys the host owns; plugins read their own subtree through
// `lookup()` so that `unknown_keys()` can report the keys nobody read. Every
// error is a ConfigError that names the file, line and column, the dotted key
// path and what was expected. No LibTorch in here.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rh::config {

// Where a value was written. Lines and columns are 1-based; line 0 means "no
// position" (a --set override, or a whole file).
struct Location {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:line:col", "file:line" without a column, or just "file" when line == 0.
  std::string str() const;
};

// what() == where.str() + ": " + key_path + ": " + message; the key path and its
// ": " are left out when the path is empty (and the location when it is empty).
class ConfigError : public std::runtime_error {
 public:
  ConfigError(const Location& where, const std::string& key_path, const std::string& message);

  const Location& where() const { return where_; }
  const std::string& key_path() const { return key_path_; }
  const std::string& message() const { return message_; }

 private:
  Location where_;
  std::string key_path_;
  std::string message_;
};

class Node;
using NodePtr = std::shared_ptr<Node>;

class Node {
 public:
  enum class Kind { Null, Scalar, Sequence, Map };

  // --- construction (the loader, --set overrides, tests) -------------------
  static NodePtr make_null(Location where);
  static NodePtr make_scalar(std::string text, bool quoted, Location where);
  static NodePtr make_sequence(Location where);
  static NodePtr make_map(Location where);

  // Deep copy, lookups not included.
  NodePtr clone() const;

  // Maps: replaces the value of `key` in place (keeping its position) or appends it.
  void set(const std::string& key, NodePtr value, Location key_where);
  // Maps: removes `key`; returns whether it was there.
  bool erase(const std::string& key);
  // Sequences.
  void append(NodePtr item);
  void replace_item(size_t index, NodePtr item);

  // Sets the dotted key path of this node and of everything below it.
  void assign_paths(const std::string& path = "");
  // Sets the location of this node, its keys and everything below it.
  void relocate(const Location& where);

  // --- reading -------------------------------------------------------------
  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_scalar() const { return kind_ == Kind::Scalar; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_map() const { return kind_ == Kind::Map; }

  const std::string& scalar() const { return text_; }  // raw text of a scalar ("" otherwise)
  bool quoted() const { return quoted_; }              // 'x', "x", |, >: always a string
  const std::vector<std::pair<std::string, NodePtr>>& map_items() const { return items_; }
  const std::vector<NodePtr>& seq_items() const { return seq_; }

  // nullptr when absent or when this is not a map; does NOT record usage.
  const Node* find(const std::string& key) const;
  // find() along a dotted path ("optim_wrapper.clip_grad"): nullptr when a
  // part is absent, or (`null_is_absent`) null.
  const Node* find_path(const std::string& dotted, bool null_is_absent = false) const;
  // Same, as an owning pointer (for code that edits the tree).
  NodePtr get(const std::string& key) const;
  // find() that also records the lookup: what plugins use on their subtree.
  const Node* lookup(const std::string& key) const;

  const Location& location() const { return where_; }
  // location().str(), kept with the node (stable storage for C-ABI string views).
  const std::string& location_text() const { return location_text_; }
  // Location of a map key (its value's location when the key is unknown here).
  const Location& key_location(const std::string& key) const;
  // Dotted key path: "strategy.bucket_cap_mb", sequence items "hooks.0.type", root "".
  const std::string& path() const { return path_; }

  // Typed reads; each throws ConfigError(location(), path(), "expected an integer, got 'abc'").
  int64_t as_int() const;                // decimal, optional sign; not 1.5, '1' or true
  double as_double() const;              // ints, floats, 1e-3, .inf, -.inf, .nan
  bool as_bool() const;                  // true/false/True/False/TRUE/FALSE
  const std::string& as_string() const;  // any scalar, quoted or plain

  // What the value looks like: "a map", "a list", "null", "an integer", "a number",
  // "a boolean", "a string".
  std::string kind_name() const;
  // For messages: "'text'" for a scalar, kind_name() otherwise.
  std::string describe_value() const;

  // --- usage tracking for plugin subtrees (single-threaded) ----------------
  void record_lookup(const std::string& key) const { lookups_.insert(key); }
  const std::set<std::string>& lookups() const { return lookups_; }

 private:
  Node(Kind kind, Location where)
      : kind_(kind), where_(std::move(where)), location_text_(where_.str()) {}
  [[noreturn]] void type_error(const std::string& expected) const;

  Kind kind_;
  Location where_;
  std::string location_text_;
  std::string path_;
  std::string text_;
  bool quoted_ = false;
  std::vector<std::pair<std::string, NodePtr>> items_;  // maps, file order
  std::vector<Location> key_locations_;                 // parallel to items_
  std::vector<NodePtr> seq_;                            // sequences
  mutable std::set<std::string> lookups_;
};

// Keys of `component` (a map such as the `strategy:` subtree) that the plugin never
// looked up. Walks every map reachable through looked-up keys (and every item of a
// looked-up list); each key not in that map's lookups() (nor, at the top level, in
// `host_keys` such as {"type", "plugin", "priority"}) gives one error located at the
// key: "unknown key for <what> (did you mean 'x'?)", the suggestion taken from the
// map's lookups() (plus host_keys at the top level). `what` is e.g. "strategy 'ddp'".
std::vector<ConfigError> unknown_keys(const Node& component, const std::set<std::string>& host_keys,
                                      const std::string& what);

}  // namespace rh::config
