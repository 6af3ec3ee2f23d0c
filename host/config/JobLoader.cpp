#include "config/JobLoader.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "config/YamlReader.hpp"

namespace rh::config {
namespace fs = std::filesystem;
namespace {

constexpr const char* kBaseKey = "_base_";
constexpr const char* kDeleteKey = "_delete_";

// Where a file was named in a `_base_` list.
struct IncludeSite {
  Location where;
  std::string path;     // key path of the item: "_base_" or "_base_.1"
  std::string written;  // the name as written
};

std::string identity_of(const std::string& file) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(file, ec);
  if (ec) canonical = fs::absolute(file, ec).lexically_normal();
  return canonical.string();
}

std::string resolve_include(const std::string& including_file, const std::string& written) {
  const fs::path name(written);
  if (name.is_absolute()) return name.lexically_normal().string();
  return (fs::path(including_file).parent_path() / name).lexically_normal().string();
}

// True when `over` is a map that says `_delete_: true`.
bool replaces_base(const Node& over) {
  if (!over.is_map()) return false;
  const Node* flag = over.find(kDeleteKey);
  return flag != nullptr && flag->as_bool();
}

// `over` merged onto `base`: maps key by key, anything else replaces.
NodePtr merge(const NodePtr& base, const NodePtr& over) {
  if (!base->is_map() || !over->is_map() || replaces_base(*over)) return over;
  NodePtr result = Node::make_map(over->location());
  for (const auto& [key, value] : base->map_items())
    result->set(key, value, base->key_location(key));
  for (const auto& [key, value] : over->map_items()) {
    const NodePtr existing = result->get(key);
    result->set(key, existing ? merge(existing, value) : value, over->key_location(key));
  }
  return result;
}

// Removes every `_delete_` (checking that it is a boolean).
void strip_delete_keys(Node& node) {
  if (const Node* flag = node.find(kDeleteKey)) {
    flag->as_bool();
    node.erase(kDeleteKey);
  }
  for (const auto& item : node.map_items()) strip_delete_keys(*item.second);
  for (const auto& item : node.seq_items()) strip_delete_keys(*item);
}

std::vector<IncludeSite> base_list(const Node& value) {
  std::vector<IncludeSite> sites;
  const auto add = [&](const Node& item) {
    if (!item.is_scalar() || item.scalar().empty()) {
      throw ConfigError(item.location(), item.path(),
                        "expected a file name, got " + item.kind_name());
    }
    sites.push_back({item.location(), item.path(), item.scalar()});
  };
  if (value.is_scalar()) {
    add(value);
  } else if (value.is_sequence()) {
    for (const auto& item : value.seq_items()) add(*item);
  } else if (!value.is_null()) {
    throw ConfigError(value.location(), value.path(),
                      "expected a file name or a list of file names, got " + value.kind_name());
  }
  return sites;
}

class Loader {
 public:
  explicit Loader(std::vector<std::string>& files) : files_(files) {}

  // Reads `file` (named at `site`, or the main file when null) with its bases merged in.
  NodePtr load(const std::string& file, const IncludeSite* site) {
    std::string text;
    if (const int error = read_text_file(file, text); error != 0) {
      if (site == nullptr) {
        throw ConfigError(Location{file}, "",
                          std::string("cannot read file: ") + std::strerror(error));
      }
      std::error_code ec;
      const std::string absolute = fs::absolute(file, ec).lexically_normal().string();
      throw ConfigError(site->where, site->path,
                        "cannot read included file '" + site->written + "' (resolved to " +
                            absolute + "): " + std::strerror(error));
    }
    if (std::find(files_.begin(), files_.end(), file) == files_.end()) files_.push_back(file);

    NodePtr root = parse_yaml(text, file);
    if (!root->is_map()) {
      throw ConfigError(root->location(), "",
                        "the job file must be a map of keys, got " + root->kind_name());
    }

    stack_.push_back({identity_of(file), file});
    NodePtr merged_bases;
    if (const NodePtr bases = root->get(kBaseKey)) {
      for (const IncludeSite& base_site : base_list(*bases)) {
        const std::string base_file = resolve_include(file, base_site.written);
        check_cycle(base_file, base_site);
        NodePtr base = load(base_file, &base_site);
        merged_bases = merged_bases ? merge(merged_bases, base) : base;
      }
      root->erase(kBaseKey);
    }
    NodePtr result = merged_bases ? merge(merged_bases, root) : root;
    strip_delete_keys(*result);
    stack_.pop_back();
    return result;
  }

 private:
  struct Frame {
    std::string identity;  // canonical path
    std::string name;      // as shown in messages
  };

  void check_cycle(const std::string& file, const IncludeSite& site) const {
    const std::string identity = identity_of(file);
    for (size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i].identity != identity) continue;
      std::string chain;
      for (size_t j = i; j < stack_.size(); ++j) chain += stack_[j].name + " -> ";
      throw ConfigError(site.where, site.path, "include cycle: " + chain + file);
    }
  }

  std::vector<std::string>& files_;
  std::vector<Frame> stack_;
};

bool all_digits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (true) {
    const size_t dot = key.find('.', start);
    segments.push_back(key.substr(start, dot - start));
    if (dot == std::string::npos) return segments;
    start = dot + 1;
  }
}

}  // namespace

void apply_set(Node& root, const std::string& set_arg) {
  const size_t equals = set_arg.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw ConfigError(Location{"--set"}, "", "expected key.path=value, got '" + set_arg + "'");
  }
  const std::string key = set_arg.substr(0, equals);
  const Location where{"--set '" + set_arg + "'"};
  const std::vector<std::string> segments = split_key(key);
  for (const auto& segment : segments) {
    if (segment.empty()) {
      throw ConfigError(where, "",
                        "expected key.path=value, got '" + set_arg + "' (empty key segment)");
    }
  }

  NodePtr value;
  try {
    value = parse_yaml(set_arg.substr(equals + 1), where.file);
  } catch (const ConfigError& e) {
    const std::string column =
        e.where().line > 0 ? " (column " + std::to_string(e.where().column) + ")" : "";
    throw ConfigError(where, key, "cannot parse the value: " + e.message() + column);
  }
  value->relocate(where);

  Node* current = &root;
  std::string walked;  // path of `current`
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    const std::string cannot_set = "cannot set '" + key + "': ";
    if (current->is_map()) {
      if (last) {
        current->set(segment, value, where);
        break;
      }
      NodePtr child = current->get(segment);
      if (!child || child->is_null()) {
        child = Node::make_map(where);
        current->set(segment, child, where);
      }
      current = child.get();
    } else if (current->is_sequence()) {
      const size_t size = current->seq_items().size();
      if (!all_digits(segment)) {
        throw ConfigError(
            where, walked,
            cannot_set + "'" + walked + "' is a list, '" + segment + "' is not an item index");
      }
      size_t index = 0;
      const auto [end, ec] =
          std::from_chars(segment.data(), segment.data() + segment.size(), index);
      if (ec != std::errc() || end != segment.data() + segment.size() || index >= size) {
        throw ConfigError(where, walked,
                          cannot_set + "index " + segment + " is out of range, '" + walked +
                              "' has " + std::to_string(size) + (size == 1 ? " item" : " items"));
      }
      if (last) {
        current->replace_item(index, value);
        break;
      }
      NodePtr child = current->seq_items()[index];
      if (child->is_null()) {
        child = Node::make_map(where);
        current->replace_item(index, child);
      }
      current = child.get();
    } else {
      throw ConfigError(where, walked,
                        cannot_set + "'" + walked + "' is " + current->kind_name() + ", not a " +
                            (all_digits(segment) ? "list" : "map"));
    }
    walked = walked.empty() ? segment : walked + "." + segment;
  }
  root.assign_paths();
}

Job load_job(const std::string& path, const std::vector<std::string>& set_args) {
  Job job;
  job.root = Loader(job.files).load(path, nullptr);
  for (const auto& set_arg : set_args) apply_set(*job.root, set_arg);
  job.root->assign_paths();
  return job;
}

}  // namespace rh::config
