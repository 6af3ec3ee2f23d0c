#include "config/YamlReader.hpp"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <vector>

namespace rh::config {
namespace {

constexpr int kMaxDepth = 200;
constexpr size_t kMaxNodes = 1'000'000;  // aliases can multiply a small file

Location to_location(const YAML::Mark& mark, const std::string& file) {
  if (mark.is_null() || mark.line < 0) return Location{file};
  return Location{file, mark.line + 1, mark.column + 1};
}

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

const char* yaml_kind_name(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "null";
    default:
      return "a scalar";
  }
}

class Converter {
 public:
  explicit Converter(const std::string& file) : file_(file) {}

  // `fallback` is used for a Null value whose mark points past it (yaml-cpp marks
  // an empty value at the next token): the key that holds it.
  NodePtr convert(const YAML::Node& yaml, const std::string& path, int depth,
                  const Location* fallback) {
    const Location where = to_location(yaml.Mark(), file_);
    if (depth > kMaxDepth) {
      throw ConfigError(where, path,
                        "nesting is too deep (more than " + std::to_string(kMaxDepth) +
                            " levels; a recursive alias?)");
    }
    if (++nodes_ > kMaxNodes) {
      throw ConfigError(
          where, path,
          "the document expands to more than " + std::to_string(kMaxNodes) + " values (aliases?)");
    }
    switch (yaml.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null: {
        const bool past_value =
            fallback != nullptr && (where.line == 0 || where.line > fallback->line);
        return Node::make_null(past_value ? *fallback : where);
      }
      case YAML::NodeType::Scalar: {
        // yaml-cpp tags plain scalars "?" and quoted or block scalars "!".
        const bool quoted = yaml.Tag() == "!" || yaml.Tag() == "tag:yaml.org,2002:str";
        return Node::make_scalar(yaml.Scalar(), quoted, where);
      }
      case YAML::NodeType::Sequence: {
        NodePtr node = Node::make_sequence(where);
        size_t index = 0;
        for (const auto& item : yaml) {
          node->append(
              convert(item, child_path(path, std::to_string(index++)), depth + 1, nullptr));
        }
        return node;
      }
      case YAML::NodeType::Map: {
        NodePtr node = Node::make_map(where);
        for (auto it = yaml.begin(); it != yaml.end(); ++it) {
          const Location key_where = to_location(it->first.Mark(), file_);
          if (!it->first.IsScalar()) {
            throw ConfigError(
                key_where, path,
                std::string("map keys must be strings, got ") + yaml_kind_name(it->first));
          }
          const std::string key = it->first.Scalar();
          if (node->find(key) != nullptr) {
            const Location& first = node->key_location(key);
            throw ConfigError(key_where, child_path(path, key),
                              "duplicate key '" + key + "' (first defined at line " +
                                  std::to_string(first.line) + ")");
          }
          node->set(key, convert(it->second, child_path(path, key), depth + 1, &key_where),
                    key_where);
        }
        return node;
      }
    }
    return Node::make_null(where);
  }

 private:
  const std::string& file_;
  size_t nodes_ = 0;
};

// Where each document of a stream starts, without building it.
class DocumentStarts : public YAML::EventHandler {
 public:
  std::vector<YAML::Mark> marks;
  void OnDocumentStart(const YAML::Mark& mark) override { marks.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

NodePtr parse_yaml(const std::string& text, const std::string& file) {
  // Count the documents first, in a bounded loop: yaml-cpp 0.7's LoadAll
  // loops forever, allocating, on some malformed input (",", or a stray '}'
  // after it: yaml-cpp issue #1040, fixed upstream by PR #1319), where the
  // parser returns the same empty document again without moving on.
  DocumentStarts starts;
  YAML::Node document;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    while (starts.marks.size() < 3 && parser.HandleNextDocument(starts)) {
      const size_t n = starts.marks.size();
      if (n >= 2 && starts.marks[n - 1].pos <= starts.marks[n - 2].pos)
        throw ConfigError(to_location(starts.marks[n - 1], file), "",
                          "YAML syntax error: the parser cannot read on from here (a stray ',', "
                          "'}' or ']'?)");
    }
    if (starts.marks.size() > 1)
      throw ConfigError(to_location(starts.marks[1], file), "",
                        "expected one YAML document, found " +
                            std::string(starts.marks.size() > 2 ? "more than 2" : "2") +
                            " (remove the '---' separators or split the file)");
    document = YAML::Load(text);  // the one document
  } catch (const YAML::Exception& e) {
    throw ConfigError(to_location(e.mark, file), "", "YAML syntax error: " + e.msg);
  }
  NodePtr root = Converter(file).convert(document, "", 0, nullptr);
  root->assign_paths();
  return root;
}

int read_text_file(const std::string& path, std::string& text) {
  errno = 0;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) return errno != 0 ? errno : EIO;
  text.clear();
  char buffer[1 << 14];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, count);
  if (std::ferror(file.get())) return errno != 0 ? errno : EIO;
  return 0;
}

NodePtr read_yaml_file(const std::string& path) {
  std::string text;
  if (const int error = read_text_file(path, text); error != 0) {
    throw ConfigError(Location{path}, "", std::string("cannot read file: ") + std::strerror(error));
  }
  return parse_yaml(text, path);
}

}  // namespace rh::config
