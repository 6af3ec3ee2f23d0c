// Helpers shared by the data tests: config trees from YAML text, ConfigError
// capture, binary fixture files.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/ConfigNode.hpp"
#include "config/YamlReader.hpp"

namespace rh::data::test {

inline std::string files_dir() { return std::string(RH_TEST_DATA_DIR) + "/files"; }

// A config tree parsed from YAML text (file name "job.yaml"), paths assigned.
inline config::NodePtr yaml(const std::string& text) {
  return config::parse_yaml(text, "job.yaml");
}

// what() of the ConfigError `run` throws, or "" (and a test failure) when it throws none.
template <typename Run>
std::string config_error(Run run) {
  try {
    run();
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError";
  return "";
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline void append_u32_big_endian(std::vector<uint8_t>& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8)
    bytes.push_back(static_cast<uint8_t>(value >> shift));
}

}  // namespace rh::data::test
