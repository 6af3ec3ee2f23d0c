// Helpers shared by the config tests: temp files, fixtures, error capture and
// tree comparison.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>  // mkdtemp

#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/ConfigNode.hpp"

namespace rh::config::test {

// A fresh directory under the system temp dir, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "rh_config_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }

  // Writes `text` to `relative` (creating folders) and returns the full path.
  std::string write(const std::string& relative, const std::string& text) const {
    const std::filesystem::path file = std::filesystem::path(path_) / relative;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file) << text;
    return file.string();
  }

 private:
  std::string path_;
};

inline std::string data_dir() { return RH_CONFIG_TEST_DATA; }
inline std::string data_path(const std::string& relative) { return data_dir() + "/" + relative; }

// The ConfigError `run` throws, or nullopt (and a test failure) when it throws none.
template <typename Run>
std::optional<ConfigError> config_error(Run run) {
  try {
    run();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError";
  return std::nullopt;
}

inline std::vector<std::string> messages(const std::vector<ConfigError>& errors) {
  std::vector<std::string> texts;
  for (const auto& e : errors) texts.emplace_back(e.what());
  return texts;
}

// Same shape, keys in the same order, same scalar texts that read as the same type.
inline ::testing::AssertionResult same_tree(const Node& a, const Node& b,
                                            const std::string& at = "") {
  const std::string where = at.empty() ? "<root>" : at;
  if (a.kind() != b.kind()) {
    return ::testing::AssertionFailure()
           << where << ": " << a.kind_name() << " vs " << b.kind_name();
  }
  if (a.is_scalar() && (a.scalar() != b.scalar() || a.kind_name() != b.kind_name())) {
    return ::testing::AssertionFailure() << where << ": '" << a.scalar() << "' (" << a.kind_name()
                                         << ") vs '" << b.scalar() << "' (" << b.kind_name() << ")";
  }
  if (a.map_items().size() != b.map_items().size() ||
      a.seq_items().size() != b.seq_items().size()) {
    return ::testing::AssertionFailure() << where << ": different sizes";
  }
  for (size_t i = 0; i < a.map_items().size(); ++i) {
    const auto& [key_a, value_a] = a.map_items()[i];
    const auto& [key_b, value_b] = b.map_items()[i];
    if (key_a != key_b)
      return ::testing::AssertionFailure() << where << ": key " << key_a << " vs " << key_b;
    if (auto r = same_tree(*value_a, *value_b, at.empty() ? key_a : at + "." + key_a); !r) return r;
  }
  for (size_t i = 0; i < a.seq_items().size(); ++i) {
    const std::string item = at.empty() ? std::to_string(i) : at + "." + std::to_string(i);
    if (auto r = same_tree(*a.seq_items()[i], *b.seq_items()[i], item); !r) return r;
  }
  return ::testing::AssertionSuccess();
}

}  // namespace rh::config::test
